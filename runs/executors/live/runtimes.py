"""The agent runtimes live executions start: npm package, pinned version, executable, and how to
tell whether what is installed is what evalhub was written against.

``package.json`` pins the same versions and ``make install`` (``npm ci``) puts each executable
in ``node_modules/.bin/``; a test checks that this table and ``package.json`` agree. Where an
executable lives is configuration (``settings.EVALHUB["RUNTIME_BINARIES"]``), read by the
executor and by ``manage.py check`` and passed in here: this module reads no settings.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

#: The project's root: ``node_modules/`` sits beside ``manage.py``.
REPO_ROOT = Path(__file__).resolve().parents[3]
NODE_MODULES = REPO_ROOT / "node_modules"
NODE_BIN = NODE_MODULES / ".bin"


@dataclass(frozen=True)
class Runtime:
    """One runtime executable: ``key`` (the ``RUNTIME_BINARIES`` key), the npm ``package`` and the
    pinned ``version``, the ``executable`` name under ``node_modules/.bin``, a ``label`` for
    people ("codex-cli"), and ``setting`` (the environment variable that points elsewhere)."""

    key: str
    package: str
    version: str
    executable: str
    label: str
    setting: str

    @property
    def default_path(self) -> Path:
        """Where ``make install`` puts the executable."""
        return NODE_BIN / self.executable

    def resolve(self, configured: str | None = None) -> str | None:
        """The executable to run, or ``None`` when there is none.

        A ``configured`` path counts alone (an executable file or nothing); without one,
        ``node_modules/.bin/<executable>``, else ``<executable>`` on ``PATH``.
        """
        if configured:
            path = Path(configured)
            return str(path) if path.is_file() and os.access(path, os.X_OK) else None
        if self.default_path.is_file() and os.access(self.default_path, os.X_OK):
            return str(self.default_path)
        return shutil.which(self.executable)

    def missing_hint(self, configured: str | None = None) -> str:
        """How to fix a missing or wrong runtime: install it, or fix the setting that points elsewhere."""
        if configured and Path(configured) != self.default_path:
            return f"fix {self.setting} to point at an executable {self.label} {self.version}, or unset it"
        return f"run `make install` (or `npm ci` in the project directory) to install {self.label} {self.version}"

    def missing_message(self, configured: str | None = None) -> str:
        """``<label> is not installed or not executable (looked for …); <hint>``."""
        looked = configured or f"node_modules/.bin/{self.executable}, PATH"
        return f"{self.label} is not installed or not executable (looked for {looked}); {self.missing_hint(configured)}"

    @property
    def manifest(self) -> Path:
        """The installed npm package's ``package.json``."""
        return NODE_MODULES / self.package / "package.json"

    def installed_version(self) -> str | None:
        """The version in the installed npm package's manifest, or ``None`` when it is not installed."""
        try:
            version = json.loads(self.manifest.read_text(encoding="utf-8")).get("version")
        except (OSError, ValueError, AttributeError):
            return None
        return str(version) if version else None

    def package_version(self, binary: str) -> str | None:
        """The version of the npm package ``binary`` belongs to: the ``package.json`` named
        :attr:`package` in a folder above the file the executable resolves to (an npm ``.bin``
        entry links into its package), or ``None`` when it is not part of one."""
        try:
            folder = Path(binary).resolve().parent
        except OSError:
            return None
        for candidate in (folder, *list(folder.parents)[:4]):
            try:
                manifest = json.loads((candidate / "package.json").read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if isinstance(manifest, dict) and manifest.get("name") == self.package and manifest.get("version"):
                return str(manifest["version"])
        return None

    def status(self, configured: str | None = None) -> tuple[bool, str]:
        """Whether the runtime is installed at the pinned version, for ``manage.py check``.

        Returns ``(ok, message)``: ``ok`` is true when the executable exists and is
        :attr:`version` — for the executable ``make install`` put in ``node_modules/.bin``, as its
        npm package's manifest says (running ``opencode --version`` takes 2 s, on every
        ``manage.py`` command); for another executable of an npm package, as that package's
        manifest says (:meth:`package_version`: the ACP agents have no ``--version`` and would
        wait for a client on stdin); for any other executable, when ``--version`` prints the
        version as a word of its output (5 s at most: a hung binary must not stall every
        command). The message says what was found or how to fix it.
        """
        binary = self.resolve(configured)
        if binary is None:
            return False, self.missing_message(configured)
        packaged = self.package_version(binary) if Path(binary) != self.default_path else None
        if packaged is not None:
            if packaged == self.version:
                return True, f"{self.label} {self.version} at {binary}"
            return (
                False,
                f"{binary} is {self.package} {packaged}, evalhub needs {self.label} {self.version}; {self.missing_hint(configured)}",
            )
        if Path(binary) == self.default_path:
            installed = self.installed_version()
            if installed == self.version:
                return True, f"{self.label} {self.version} at {binary}"
            found = f"{self.package} {installed}" if installed else f"no {self.manifest.relative_to(REPO_ROOT)}"
            return False, f"{binary} is {found}, evalhub needs {self.label} {self.version}; {self.missing_hint(configured)}"
        try:
            completed = subprocess.run(
                [binary, "--version"],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=5,
                env={"PATH": os.environ.get("PATH", os.defpath)},
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return False, f"{binary} --version failed: {exc}; {self.missing_hint(configured)}"
        output = " ".join(completed.stdout.decode("utf-8", "replace").split())
        if completed.returncode != 0 or self.version not in output.split():
            return False, (
                f"{binary} reports {output[:120] or 'nothing'!r}, evalhub needs {self.label} {self.version}; "
                f"{self.missing_hint(configured)}"
            )
        return True, f"{self.label} {self.version} at {binary}"


#: Every runtime a driver starts, by ``RUNTIME_BINARIES`` key.
RUNTIMES: dict[str, Runtime] = {
    "codex": Runtime(
        key="codex",
        package="@openai/codex",
        version="0.171.0",
        executable="codex",
        label="codex-cli",
        setting="EVALHUB_CODEX_BIN",
    ),
    "opencode": Runtime(
        key="opencode",
        package="opencode-ai",
        version="1.18.33",
        executable="opencode",
        label="opencode",
        setting="EVALHUB_OPENCODE_BIN",
    ),
    # The ACP agents acpx's ``claude`` and ``codex`` profiles launch (runs.executors.live.drivers.acp).
    "claude-acp": Runtime(
        key="claude-acp",
        package="@agentclientprotocol/claude-agent-acp",
        version="0.101.0",
        executable="claude-agent-acp",
        label="claude-agent-acp",
        setting="EVALHUB_CLAUDE_ACP_BIN",
    ),
    "codex-acp": Runtime(
        key="codex-acp",
        package="@agentclientprotocol/codex-acp",
        version="2.6.0",
        executable="codex-acp",
        label="codex-acp",
        setting="EVALHUB_CODEX_ACP_BIN",
    ),
}
