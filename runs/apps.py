from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "runs"
    verbose_name = "Runs"

    def ready(self) -> None:
        # Connect to django-q2's worker signals (no work happens here: the receivers run in a
        # worker process when it starts and before each task).
        from django_q.signals import post_spawn, pre_execute

        from runs import worker

        post_spawn.connect(worker.on_worker_start, dispatch_uid="evalhub-worker-start")
        pre_execute.connect(worker.before_task, dispatch_uid="evalhub-worker-before-task")
