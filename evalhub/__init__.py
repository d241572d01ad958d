"""evalhub: plans, runs and reports recurring live evaluations of coding-agent runtimes."""

__version__ = "0.1.0"
