"""The per-execution control plane: an isolated, thread-safe task board (the control plane of docs/live-harness.md).

One :class:`ControlPlane` per live execution holds everything the agent can see and change: the
source task ``task-1`` (the case title, the case prompt as description), child tasks and their
dependencies, comments, documents with revisions, human interactions, progress reports, the run
result, the runs the harness opened, state revisions and idempotency keys. The agent reaches it
only through :meth:`ControlPlane.call` with the typed operations of :mod:`runs.executors.live.operations`
(served over MCP by :mod:`runs.executors.live.mcp_server`); the human side (the case driver) uses the
other public methods.

Every agent call is recorded as a tool call with a receipt id ``rcpt-<n>`` — whether it succeeded,
was refused or replayed — and the board's changes emit canonical events through the execution's
:class:`~runs.executors.live.contracts.EventLog` with ``source="control_plane"``. Event data carries ids,
kinds and counts only; document bodies, prompts and summaries stay in :meth:`snapshot`.

State history: the board starts at revision 1 with one ``board.created`` entry; every accepted
agent mutation and every human decision bumps the revision and appends ``{"revision",
"operation", "runId", "actor", "taskId"}``. ``actor`` is ``agent`` for operations (``operation``
is the operation name) and ``harness`` for the human side (``operation`` is ``eval.<what>``), so
an observer can tell the agent's changes from the harness's. Opening and ending runs is run
bookkeeping (``runs``), not a board change.

Events are emitted after the board's lock is released (listeners may call back in), so the
events of two calls racing on different threads may interleave; the events of one call keep
their order (``run.result.proposed`` always precedes its ``accepted``/``rejected``).
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Mapping
from typing import Any

from runs.executors.live.contracts import EventLog
from runs.executors.live.operations import (
    OPERATIONS,
    answer_problems,
    argument_problems,
    get_operation,
    operation_names,
)

SOURCE_TASK = "task-1"
#: Why a run was opened (``begin_run``).
WAKE_REASONS = (
    "start",
    "interaction_resolved",
    "review_rejected",
    "steer",
    "blockers_resolved",
    "restart",
    "continuation",
)
#: How a run ended (``end_run``).
RUN_STATUSES = ("succeeded", "failed", "cancelled", "yielded", "blocked")
#: Task statuses, as the reference's ``issueStatus``.
TASK_STATUSES = ("todo", "in_progress", "blocked", "in_review", "done", "cancelled")
#: Error codes of a refused call.
ERROR_CODES = ("schema_error", "unknown_operation", "not_found", "conflict", "not_allowed")

#: The agents a task can be assigned to (``list_agents``). ``actor-1`` is the agent under test.
AGENTS: tuple[Mapping[str, Any], ...] = (
    {"id": "actor-1", "name": "Engineer (you)", "role": "engineer", "status": "active", "provider": None},
    {"id": "agent-codex", "name": "Codex engineer", "role": "engineer", "status": "active", "provider": "codex"},
    {"id": "agent-opencode", "name": "opencode engineer", "role": "engineer", "status": "active", "provider": "opencode"},
    {"id": "agent-acpx", "name": "ACP engineer", "role": "engineer", "status": "active", "provider": "acpx"},
)

_DISPOSITION_STATUS = {"done": "done", "needs_review": "in_review", "blocked": "blocked"}
_CALL_ONLY_KEYS = ("idempotencyKey", "expectedRevision")


class _Refused(Exception):
    """An agent call the board refuses: becomes an ``{"ok": False, "error": ...}`` result."""

    def __init__(self, code: str, message: str, details: list[str] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details or []


class ControlPlane:
    """The task board of one execution. Thread-safe; every public method may be called from any
    thread (the MCP server calls :meth:`call` from its own).

    ``case`` is the case document (``id``, ``title``, ``steps``, ``assertions``), ``prompt`` the
    text the agent is given (it becomes the source task's description), ``events`` the
    execution's event log.
    """

    def __init__(self, *, execution_id: str, case: Mapping[str, Any], prompt: str, events: EventLog) -> None:
        self.execution_id = execution_id
        self.case = case
        self.events = events
        self._lock = threading.RLock()
        self._tasks: dict[str, dict[str, Any]] = {
            SOURCE_TASK: {
                "id": SOURCE_TASK,
                "title": str(case.get("title") or case.get("id") or "Task"),
                "description": prompt,
                "status": "todo",
                "parentId": None,
                "blockedBy": [],
                "assignee": "actor-1",
            }
        }
        # Private per-task flags: was the task blocked by its dependencies, and what it was before.
        self._dependency_blocked: dict[str, str] = {}
        self._completed_children: set[str] = set()
        self._comments: list[dict[str, Any]] = []
        self._documents: list[dict[str, Any]] = []
        self._interactions: dict[str, dict[str, Any]] = {}
        self._runs: list[dict[str, Any]] = []
        self._run_result: dict[str, Any] | None = None
        self._progress: list[dict[str, Any]] = []
        self._tool_calls: list[dict[str, Any]] = []
        self._revision = 1
        self._history: list[dict[str, Any]] = [
            {"revision": 1, "operation": "board.created", "runId": None, "actor": "harness", "taskId": SOURCE_TASK}
        ]
        self._idempotency: dict[str, tuple[str, dict[str, Any], str, dict[str, Any]]] = {}
        self._receipts = 0
        self._open_run: str | None = None

    # ------------------------------------------------------------------ agent side

    def operations(self) -> list[dict[str, Any]]:
        """The typed operations, in a stable order: ``[{"name", "description", "inputSchema",
        "readOnly"}]`` (fresh copies; the schemas are JSON Schema objects)."""
        return [operation.as_dict() for operation in OPERATIONS]

    def call(self, operation: str, arguments: Any) -> dict[str, Any]:
        """Run one agent operation. Never raises for the agent's mistakes.

        ``arguments`` is the JSON object the agent sent (``None`` counts as ``{}``). Returns
        ``{"ok": True, "receiptId": "rcpt-<n>", "result": {...}, "duplicate": bool}`` or
        ``{"ok": False, "receiptId": "rcpt-<n>", "error": {"code", "message", "details": [str]}}``
        with ``code`` one of :data:`ERROR_CODES`; ``schema_error`` details list every problem so
        the agent can fix its call in one go. Mutating operations accept ``idempotencyKey`` (the
        same key with the same arguments returns the first result with ``duplicate: True`` and
        changes nothing; with other arguments it is a ``conflict``) and ``expectedRevision``
        (stale → ``conflict``). Every call, refused or not, is recorded in ``toolCalls``.
        """
        pending: list[tuple[str, dict[str, Any]]] = []
        with self._lock:
            outcome = self._call_locked(operation, {} if arguments is None else arguments, pending)
        self._emit(pending)
        return outcome

    def _call_locked(self, name: str, arguments: Any, pending: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
        self._receipts += 1
        receipt = f"rcpt-{self._receipts}"
        run_id = self._open_run
        operation = get_operation(name) if isinstance(name, str) else None
        if operation is None:
            refused = _Refused(
                "unknown_operation",
                f"There is no operation {name!r}.",
                [f"known operations: {', '.join(operation_names())}"],
            )
            return self._refuse(receipt, str(name), False, run_id, refused)
        try:
            problems = argument_problems(name, arguments)
            if problems:
                if name == "finish_task":
                    pending.append(("run.result.proposed", {"receiptId": receipt, "runId": run_id}))
                    pending.append(
                        (
                            "run.result.rejected",
                            {"receiptId": receipt, "runId": run_id, "code": "schema_error", "problemCount": len(problems)},
                        )
                    )
                raise _Refused(
                    "schema_error",
                    f"Invalid arguments for {name}: {len(problems)} problem(s). Fix them all and call {name} again.",
                    problems,
                )
            if operation.read_only:
                result = getattr(self, f"_op_{name}")(arguments)
                pending.append(("research.completed", {"operation": name, "receiptId": receipt, "runId": run_id}))
                return self._accept(receipt, name, True, run_id, result, duplicate=False)
            key = arguments.get("idempotencyKey")
            core = {k: v for k, v in arguments.items() if k not in _CALL_ONLY_KEYS}
            if key is not None and key in self._idempotency:
                first_name, first_core, first_receipt, first_result = self._idempotency[key]
                if first_name != name or first_core != core:
                    raise _Refused(
                        "conflict",
                        f"idempotencyKey {key!r} was already used by {first_receipt} for a different call; use a new key for a new call.",
                    )
                return self._accept(receipt, name, False, run_id, copy.deepcopy(first_result), duplicate=True)
            expected = arguments.get("expectedRevision")
            if expected is not None and expected != self._revision:
                raise _Refused(
                    "conflict",
                    f"expectedRevision {expected} is stale: the board is at revision {self._revision}. "
                    "Read it again (get_task_context) and retry.",
                )
            if self._tasks[SOURCE_TASK]["status"] == "cancelled":
                raise _Refused("not_allowed", f"{SOURCE_TASK} was cancelled; stop working and end your turn.")
            result = getattr(self, f"_op_{name}")(arguments, receipt, run_id, pending)
            self._bump(name, run_id, "agent", result.get("taskId"))
            result["revision"] = self._revision
            if key is not None:
                self._idempotency[key] = (name, core, receipt, copy.deepcopy(result))
            return self._accept(receipt, name, False, run_id, result, duplicate=False)
        except _Refused as refused:
            return self._refuse(receipt, name, operation.read_only, run_id, refused)

    def _accept(
        self, receipt: str, name: str, read_only: bool, run_id: str | None, result: dict[str, Any], *, duplicate: bool
    ) -> dict[str, Any]:
        self._record(receipt, name, read_only, run_id, "duplicate" if duplicate else "ok", None)
        return {"ok": True, "receiptId": receipt, "result": result, "duplicate": duplicate}

    def _refuse(self, receipt: str, name: str, read_only: bool, run_id: str | None, refused: _Refused) -> dict[str, Any]:
        self._record(receipt, name, read_only, run_id, "error", refused.code)
        error = {"code": refused.code, "message": refused.message, "details": list(refused.details)}
        return {"ok": False, "receiptId": receipt, "error": error}

    def _record(self, receipt: str, name: str, read_only: bool, run_id: str | None, outcome: str, code: str | None) -> None:
        self._tool_calls.append(
            {
                "receiptId": receipt,
                "operation": name,
                "readOnly": read_only,
                "outcome": outcome,
                "errorCode": code,
                "runId": run_id,
                "atMs": self.events.now_ms(),
            }
        )

    def _bump(self, operation: str, run_id: str | None, actor: str, task_id: str | None) -> None:
        self._revision += 1
        self._history.append({"revision": self._revision, "operation": operation, "runId": run_id, "actor": actor, "taskId": task_id})

    def _emit(self, pending: list[tuple[str, dict[str, Any]]]) -> None:
        for event_type, data in pending:
            self.events.emit(event_type, source="control_plane", data=data)

    # ------------------------------------------------------------------ board helpers

    def _task(self, task_id: str | None) -> dict[str, Any]:
        task_id = task_id or SOURCE_TASK
        task = self._tasks.get(task_id)
        if task is None:
            raise _Refused("not_found", f"There is no task {task_id}.", [f"known tasks: {', '.join(self._tasks)}"])
        return task

    def _public_task(self, task: Mapping[str, Any]) -> dict[str, Any]:
        return copy.deepcopy(dict(task))

    def _public_interaction(self, interaction: Mapping[str, Any]) -> dict[str, Any]:
        return copy.deepcopy(dict(interaction))

    def _latest_documents(self, task_id: str) -> dict[str, dict[str, Any]]:
        latest: dict[str, dict[str, Any]] = {}
        for document in self._documents:
            if document["taskId"] == task_id:
                latest[document["key"]] = document
        return latest

    def _refresh_blocked(self, task: dict[str, Any]) -> bool:
        """Block a task with open blockers, unblock one whose blockers are all done. Returns
        whether it was unblocked."""
        open_blockers = [b for b in task["blockedBy"] if self._tasks[b]["status"] != "done"]
        if open_blockers and task["status"] not in ("blocked", "done", "cancelled"):
            self._dependency_blocked[task["id"]] = task["status"]
            task["status"] = "blocked"
        elif not open_blockers and task["id"] in self._dependency_blocked:
            before = self._dependency_blocked.pop(task["id"])
            if task["status"] == "blocked":
                task["status"] = before
                return True
        return False

    def _depends_on(self, task_id: str, target: str) -> bool:
        seen: set[str] = set()
        stack = [task_id]
        while stack:
            current = stack.pop()
            if current == target:
                return True
            if current not in seen:
                seen.add(current)
                stack.extend(self._tasks[current]["blockedBy"])
        return False

    def _new_interaction(
        self, kind: str, task_id: str, run_id: str | None, receipt: str, prompt: str, origin: str, **spec: Any
    ) -> dict[str, Any]:
        interaction = {
            "id": f"interaction-{len(self._interactions) + 1}",
            "kind": kind,
            "status": "pending",
            "taskId": task_id,
            "runId": run_id,
            "receiptId": receipt,
            "origin": origin,
            "prompt": prompt,
            **{key: copy.deepcopy(value) for key, value in spec.items() if value is not None},
            "answer": None,
            "partialAnswer": None,
            "answeredItems": [],
        }
        self._interactions[interaction["id"]] = interaction
        return interaction

    # ------------------------------------------------------------------ mutations

    def _op_report_progress(self, args: dict, receipt: str, run_id: str | None, pending: list) -> dict[str, Any]:
        entry = {"message": args["message"], "percent": args.get("percent"), "runId": run_id, "receiptId": receipt}
        self._progress.append(entry)
        data = {"receiptId": receipt, "runId": run_id}
        if args.get("percent") is not None:
            data["percent"] = args["percent"]
        pending.append(("run.progress.reported", data))
        return {"taskId": SOURCE_TASK, "progressCount": len(self._progress)}

    def _op_write_document(self, args: dict, receipt: str, run_id: str | None, pending: list) -> dict[str, Any]:
        task = self._task(args.get("taskId"))
        previous = self._latest_documents(task["id"]).get(args["key"])
        revision = previous["revision"] + 1 if previous else 1
        title = args.get("title") or (previous["title"] if previous else args["key"])
        self._documents.append(
            {
                "key": args["key"],
                "taskId": task["id"],
                "revision": revision,
                "title": title,
                "body": args["body"],
                "runId": run_id,
                "receiptId": receipt,
            }
        )
        data = {"taskId": task["id"], "key": args["key"], "revision": revision, "receiptId": receipt}
        pending.append(("plan.updated" if args["key"] == "plan" else "document.updated", data))
        return {"taskId": task["id"], "key": args["key"], "documentRevision": revision}

    def _op_request_human_input(self, args: dict, receipt: str, run_id: str | None, pending: list) -> dict[str, Any]:
        task = self._task(args.get("taskId"))
        interaction = self._new_interaction(
            args["kind"],
            task["id"],
            run_id,
            receipt,
            args["prompt"],
            "request_human_input",
            questions=args.get("questions"),
            options=args.get("options"),
            items=args.get("items"),
        )
        pending.append(
            (
                "interaction.requested",
                {"interactionId": interaction["id"], "kind": args["kind"], "taskId": task["id"], "receiptId": receipt},
            )
        )
        return {
            "taskId": task["id"],
            "interactionId": interaction["id"],
            "status": "pending",
            "message": "Waiting for the human. End your turn now; you will be woken with the answer.",
        }

    def _op_finish_task(self, args: dict, receipt: str, run_id: str | None, pending: list) -> dict[str, Any]:
        pending.append(("run.result.proposed", {"receiptId": receipt, "runId": run_id}))
        try:
            task_id = args.get("taskId") or SOURCE_TASK
            if task_id != SOURCE_TASK:
                self._task(task_id)
                raise _Refused(
                    "not_allowed",
                    f"{task_id} is a delegated task; its assignee finishes it. Finish the source task {SOURCE_TASK}.",
                )
            if self._run_result is not None and self._run_result["runId"] == run_id:
                raise _Refused(
                    "conflict",
                    f"This run already has an accepted result ({self._run_result['receiptId']}); finish_task is called once per run.",
                )
        except _Refused as refused:
            pending.append(("run.result.rejected", {"receiptId": receipt, "runId": run_id, "code": refused.code}))
            raise
        task = self._tasks[SOURCE_TASK]
        disposition = args.get("disposition", "done")
        verifications = copy.deepcopy(args.get("verifications", []))
        self._run_result = {
            "summary": args["summary"],
            "disposition": disposition,
            "verifications": verifications,
            "receiptId": receipt,
            "runId": run_id,
        }
        comment = {
            "id": f"comment-{len(self._comments) + 1}",
            "taskId": SOURCE_TASK,
            "author": "agent",
            "body": args["summary"],
            "runId": run_id,
            "receiptId": receipt,
        }
        self._comments.append(comment)
        task["status"] = _DISPOSITION_STATUS[disposition]
        self._dependency_blocked.pop(SOURCE_TASK, None)
        pending.append(
            (
                "run.result.accepted",
                {"receiptId": receipt, "runId": run_id, "disposition": disposition, "verificationCount": len(verifications)},
            )
        )
        return {"taskId": SOURCE_TASK, "disposition": disposition, "taskStatus": task["status"], "commentId": comment["id"]}

    def _op_request_review(self, args: dict, receipt: str, run_id: str | None, pending: list) -> dict[str, Any]:
        task = self._task(args.get("taskId"))
        interaction = self._new_interaction("confirmation", task["id"], run_id, receipt, args["summary"], "request_review")
        task["status"] = "in_review"
        pending.append(
            (
                "interaction.requested",
                {"interactionId": interaction["id"], "kind": "confirmation", "taskId": task["id"], "receiptId": receipt},
            )
        )
        return {"taskId": task["id"], "interactionId": interaction["id"], "taskStatus": "in_review"}

    def _op_block_task(self, args: dict, receipt: str, run_id: str | None, pending: list) -> dict[str, Any]:
        task = self._task(args.get("taskId"))
        task["status"] = "blocked"
        task["blockedReason"] = args["reason"]
        self._dependency_blocked.pop(task["id"], None)
        pending.append(("task.blocked", {"taskId": task["id"], "receiptId": receipt}))
        return {"taskId": task["id"], "taskStatus": "blocked"}

    def _op_create_task(self, args: dict, receipt: str, run_id: str | None, pending: list) -> dict[str, Any]:
        assignee = args.get("assignee")
        if assignee is not None and assignee not in {agent["id"] for agent in AGENTS}:
            raise _Refused(
                "not_found",
                f"There is no agent {assignee!r}.",
                [f"known agents: {', '.join(agent['id'] for agent in AGENTS)} (see list_agents)"],
            )
        task_id = f"task-{len(self._tasks) + 1}"
        self._tasks[task_id] = {
            "id": task_id,
            "title": args["title"],
            "description": args["description"],
            "status": "todo",
            "parentId": SOURCE_TASK,
            "blockedBy": [],
            "assignee": assignee,
        }
        pending.append(("delegation.created", {"taskId": task_id, "parentId": SOURCE_TASK, "assignee": assignee, "receiptId": receipt}))
        return {"taskId": task_id, "parentId": SOURCE_TASK, "taskStatus": "todo"}

    def _op_set_dependencies(self, args: dict, receipt: str, run_id: str | None, pending: list) -> dict[str, Any]:
        task = self._task(args["taskId"])
        unknown = [b for b in args["blockedBy"] if b not in self._tasks]
        if unknown:
            raise _Refused(
                "not_found",
                f"Unknown blocking task(s): {', '.join(unknown)}.",
                [f"known tasks: {', '.join(self._tasks)}"],
            )
        if task["id"] in args["blockedBy"]:
            raise _Refused("not_allowed", f"{task['id']} cannot block itself.")
        cycles = [b for b in args["blockedBy"] if self._depends_on(b, task["id"])]
        if cycles:
            raise _Refused(
                "not_allowed",
                f"Dependency cycle: {', '.join(cycles)} already wait(s) for {task['id']}.",
            )
        task["blockedBy"] = list(args["blockedBy"])
        self._refresh_blocked(task)
        pending.append(("task.dependencies.updated", {"taskId": task["id"], "blockedBy": list(task["blockedBy"]), "receiptId": receipt}))
        return {"taskId": task["id"], "blockedBy": list(task["blockedBy"]), "taskStatus": task["status"]}

    # ------------------------------------------------------------------ reads

    def _op_get_task_context(self, args: dict) -> dict[str, Any]:
        task = self._task(args.get("taskId"))
        context = {
            "task": self._public_task(task),
            "comments": [copy.deepcopy(c) for c in self._comments if c["taskId"] == task["id"]],
            "documents": [
                {"key": d["key"], "title": d["title"], "revision": d["revision"]} for d in self._latest_documents(task["id"]).values()
            ],
            "interactions": [self._public_interaction(i) for i in self._interactions.values() if i["taskId"] == task["id"]],
            "children": [self._public_task(t) for t in self._tasks.values() if t["parentId"] == task["id"]],
            "revision": self._revision,
        }
        if task["id"] == SOURCE_TASK:
            context["runResult"] = copy.deepcopy(self._run_result)
        return context

    def _op_get_task_history(self, args: dict) -> dict[str, Any]:
        task = self._task(args.get("taskId"))
        entries = [copy.deepcopy(entry) for entry in self._history if entry["taskId"] == task["id"]]
        return {"taskId": task["id"], "entries": entries, "revision": self._revision}

    def _op_list_documents(self, args: dict) -> dict[str, Any]:
        task = self._task(args.get("taskId"))
        documents = [{"key": d["key"], "title": d["title"], "revision": d["revision"]} for d in self._latest_documents(task["id"]).values()]
        return {"taskId": task["id"], "documents": documents}

    def _op_read_document(self, args: dict) -> dict[str, Any]:
        task = self._task(args.get("taskId"))
        latest = self._latest_documents(task["id"])
        document = latest.get(args["key"])
        if document is None:
            raise _Refused(
                "not_found",
                f"{task['id']} has no document {args['key']!r}.",
                [f"existing keys: {', '.join(latest) or '(none)'}"],
            )
        return {key: document[key] for key in ("key", "taskId", "revision", "title", "body")}

    def _op_search_tasks(self, args: dict) -> dict[str, Any]:
        query = args["query"].casefold()
        found = [
            {"id": t["id"], "title": t["title"], "status": t["status"], "parentId": t["parentId"]}
            for t in self._tasks.values()
            if query in t["title"].casefold() or query in t["description"].casefold()
        ]
        return {"query": args["query"], "tasks": found}

    def _op_list_agents(self, args: dict) -> dict[str, Any]:
        return {"agents": [dict(agent) for agent in AGENTS]}

    def _op_get_agent(self, args: dict) -> dict[str, Any]:
        for agent in AGENTS:
            if agent["id"] == args["agentId"]:
                return {"agent": dict(agent)}
        raise _Refused(
            "not_found",
            f"There is no agent {args['agentId']!r}.",
            [f"known agents: {', '.join(agent['id'] for agent in AGENTS)}"],
        )

    # ------------------------------------------------------------------ human / harness side

    def begin_run(self, wake_reason: str) -> str:
        """Open the next run (``run-1``, ``run-2``...) and return its id; the source task moves
        from ``todo`` to ``in_progress``. ``wake_reason`` is one of :data:`WAKE_REASONS`.

        Raises ``ValueError`` for an unknown reason or while another run is open.
        """
        if wake_reason not in WAKE_REASONS:
            raise ValueError(f"unknown wake reason {wake_reason!r}; expected one of {', '.join(WAKE_REASONS)}")
        with self._lock:
            if self._open_run is not None:
                raise ValueError(f"{self._open_run} is still open; end it before beginning another run")
            run_id = f"run-{len(self._runs) + 1}"
            self._runs.append(
                {"id": run_id, "wakeReason": wake_reason, "status": "running", "startedMs": self.events.now_ms(), "endedMs": None}
            )
            self._open_run = run_id
            source = self._tasks[SOURCE_TASK]
            if source["status"] == "todo":
                source["status"] = "in_progress"
            return run_id

    def end_run(self, status: str) -> None:
        """End the open run with ``status`` (one of :data:`RUN_STATUSES`).

        Raises ``ValueError`` for an unknown status or when no run is open.
        """
        if status not in RUN_STATUSES:
            raise ValueError(f"unknown run status {status!r}; expected one of {', '.join(RUN_STATUSES)}")
        with self._lock:
            if self._open_run is None:
                raise ValueError("no run is open")
            run = next(run for run in self._runs if run["id"] == self._open_run)
            run["status"] = status
            run["endedMs"] = self.events.now_ms()
            self._open_run = None

    @property
    def current_run_id(self) -> str | None:
        """The open run's id, or ``None`` between runs."""
        with self._lock:
            return self._open_run

    def pending_interactions(self) -> list[dict[str, Any]]:
        """Pending interactions, oldest first: ``{"id", "kind", "status", "taskId", "runId",
        "prompt", "origin", "questions" | "options" | "items" (by kind), "answeredItems" (ids or
        options answered so far by partial answers), "partialAnswer", "answer": None,
        "receiptId"}``."""
        with self._lock:
            return [self._public_interaction(i) for i in self._interactions.values() if i["status"] == "pending"]

    def answer_interaction(self, interaction_id: str, answer: Mapping[str, Any], *, partial: bool = False) -> dict[str, Any]:
        """Answer a pending interaction with the typed answer of its kind (module docstring of
        :mod:`runs.executors.live.operations`) and return the interaction as :meth:`pending_interactions`
        shows it.

        ``partial=True`` records the answered part (merged with earlier parts) and leaves the
        interaction pending. A complete answer, together with the earlier parts, must cover every
        question (``questions``) or item (``item_verdicts``); suggestions left undecided in a
        complete ``suggest_tasks`` answer count as rejected. A ``confirmation`` cannot be partial;
        it ends ``accepted`` (confirmed) or ``rejected`` like :meth:`decide_review`; every other
        kind ends ``answered``. Accepted suggestions are recorded, not turned into tasks.

        Raises ``ValueError`` naming every problem: unknown or no longer pending interaction, an
        answer of the wrong shape, unknown question/item ids or options, a missing part.
        """
        with self._lock:
            interaction = self._pending(interaction_id)
            kind = interaction["kind"]
            problems = answer_problems(kind, answer)
            if problems:
                raise ValueError(f"invalid {kind} answer for {interaction_id}: " + "; ".join(problems))
            if kind == "confirmation":
                if partial:
                    raise ValueError(f"{interaction_id} is a confirmation; it cannot be answered partially")
                return self._decide(interaction, bool(answer["confirmed"]), answer.get("note"))
            merged, answered, missing = getattr(self, f"_merge_{kind}")(interaction, answer)
            if not partial and missing:
                raise ValueError(
                    f"{interaction_id} still lacks an answer for: {', '.join(missing)} "
                    "(answer them, or pass partial=True to answer part of it)"
                )
            interaction["answeredItems"] = answered
            if partial:
                interaction["partialAnswer"] = merged
                self._bump("eval.interaction_partially_answered", self._open_run, "harness", interaction["taskId"])
            else:
                interaction["partialAnswer"] = None
                interaction["answer"] = self._final_answer(interaction, merged)
                interaction["status"] = "answered"
                self._bump("eval.interaction_answered", self._open_run, "harness", interaction["taskId"])
            return self._public_interaction(interaction)

    def _pending(self, interaction_id: str) -> dict[str, Any]:
        interaction = self._interactions.get(interaction_id)
        if interaction is None:
            pending = [i for i, v in self._interactions.items() if v["status"] == "pending"]
            raise ValueError(f"unknown interaction {interaction_id!r}; pending: {', '.join(pending) or '(none)'}")
        if interaction["status"] != "pending":
            raise ValueError(f"{interaction_id} is no longer pending (it is {interaction['status']})")
        return interaction

    def _merge_questions(self, interaction: dict, answer: Mapping[str, Any]) -> tuple[dict, list[str], list[str]]:
        questions = {q["id"]: q for q in interaction["questions"]}
        problems = []
        for question_id, text in answer["answers"].items():
            question = questions.get(question_id)
            if question is None:
                problems.append(f"unknown question {question_id!r} (questions: {', '.join(questions)})")
            elif question.get("options") and text not in question["options"]:
                problems.append(f"answer {text!r} to {question_id!r} is not one of its options: {', '.join(question['options'])}")
        if problems:
            raise ValueError(f"invalid questions answer for {interaction['id']}: " + "; ".join(problems))
        merged = {**((interaction["partialAnswer"] or {}).get("answers", {})), **answer["answers"]}
        answered = [q for q in questions if q in merged]
        return {"answers": merged}, answered, [q for q in questions if q not in merged]

    def _merge_suggest_tasks(self, interaction: dict, answer: Mapping[str, Any]) -> tuple[dict, list[str], list[str]]:
        titles = interaction["options"]
        problems: list[str] = []

        def resolve(reference: Any) -> int | None:
            if isinstance(reference, int) and 0 <= reference < len(titles):
                return reference
            if isinstance(reference, str) and reference in titles:
                return titles.index(reference)
            problems.append(f"no suggestion {reference!r} (indexes 0..{len(titles) - 1} or titles: {', '.join(titles)})")
            return None

        accepted = {resolve(r) for r in answer.get("accepted", [])} - {None}
        rejected = {resolve(r) for r in answer.get("rejected", [])} - {None}
        if not answer.get("accepted") and not answer.get("rejected"):
            problems.append("accept or reject at least one suggestion")
        both = accepted & rejected
        if both:
            problems.append(f"suggestions both accepted and rejected: {', '.join(titles[i] for i in sorted(both))}")
        if problems:
            raise ValueError(f"invalid suggest_tasks answer for {interaction['id']}: " + "; ".join(problems))
        earlier = interaction["partialAnswer"] or {"accepted": [], "rejected": []}
        decided = {titles.index(t): True for t in earlier["accepted"]} | {titles.index(t): False for t in earlier["rejected"]}
        decided |= dict.fromkeys(accepted, True) | dict.fromkeys(rejected, False)
        merged = {
            "accepted": [titles[i] for i in range(len(titles)) if decided.get(i) is True],
            "rejected": [titles[i] for i in range(len(titles)) if decided.get(i) is False],
        }
        answered = [titles[i] for i in range(len(titles)) if i in decided]
        return merged, answered, []

    def _merge_checkbox(self, interaction: dict, answer: Mapping[str, Any]) -> tuple[dict, list[str], list[str]]:
        options = interaction["options"]
        unknown = [o for o in answer["checked"] if o not in options]
        if unknown:
            raise ValueError(
                f"invalid checkbox answer for {interaction['id']}: unknown option(s) {', '.join(map(repr, unknown))} "
                f"(options: {', '.join(options)})"
            )
        checked = set((interaction["partialAnswer"] or {}).get("checked", [])) | set(answer["checked"])
        ordered = [o for o in options if o in checked]
        return {"checked": ordered}, ordered, []

    def _merge_item_verdicts(self, interaction: dict, answer: Mapping[str, Any]) -> tuple[dict, list[str], list[str]]:
        items = [item["id"] for item in interaction["items"]]
        unknown = [i for i in answer["verdicts"] if i not in items]
        if unknown:
            raise ValueError(
                f"invalid item_verdicts answer for {interaction['id']}: unknown item(s) {', '.join(map(repr, unknown))} "
                f"(items: {', '.join(items)})"
            )
        merged = {**((interaction["partialAnswer"] or {}).get("verdicts", {})), **answer["verdicts"]}
        ordered = {i: merged[i] for i in items if i in merged}
        return {"verdicts": ordered}, list(ordered), [i for i in items if i not in merged]

    def _final_answer(self, interaction: dict, merged: dict) -> dict:
        if interaction["kind"] == "suggest_tasks":
            # Suggestions the human left undecided are rejected.
            rejected = [t for t in interaction["options"] if t not in merged["accepted"]]
            return {"accepted": list(merged["accepted"]), "rejected": rejected}
        return merged

    def decide_review(self, interaction_id: str, decision: str, note: str) -> dict[str, Any]:
        """Approve or reject a pending ``confirmation`` interaction (from ``request_review`` or a
        ``request_human_input`` of kind ``confirmation``) and return it.

        ``approve`` → status ``accepted``, answer ``{"confirmed": True, "note"}``; a
        ``request_review`` task then becomes ``done``. ``reject`` → status ``rejected``, answer
        ``{"confirmed": False, "note"}``; a task waiting ``in_review`` goes back to
        ``in_progress``. Raises ``ValueError`` for an unknown decision, an unknown or settled
        interaction, or one of another kind.
        """
        if decision not in ("approve", "reject"):
            raise ValueError(f"unknown review decision {decision!r}; expected approve or reject")
        with self._lock:
            interaction = self._pending(interaction_id)
            if interaction["kind"] != "confirmation":
                raise ValueError(f"{interaction_id} is a {interaction['kind']} interaction; answer it with answer_interaction")
            return self._decide(interaction, decision == "approve", note)

    def _decide(self, interaction: dict, confirmed: bool, note: str | None) -> dict[str, Any]:
        interaction["status"] = "accepted" if confirmed else "rejected"
        interaction["answer"] = {"confirmed": confirmed, **({"note": note} if note is not None else {})}
        task = self._tasks[interaction["taskId"]]
        if confirmed and interaction["origin"] == "request_review" and task["status"] == "in_review":
            task["status"] = "done"
        elif not confirmed and task["status"] == "in_review":
            task["status"] = "in_progress"
        operation = "eval.review_approved" if confirmed else "eval.review_rejected"
        self._bump(operation, self._open_run, "harness", task["id"])
        return self._public_interaction(interaction)

    def complete_child(self, task_id: str, summary: str) -> dict[str, Any]:
        """Finish a delegated child task as the control plane (its assignee's work is simulated):
        the child becomes ``done`` with ``summary`` as its comment, tasks it blocked are unblocked,
        and ``delegation.completed`` {taskId, parentId, unblocked} is emitted.

        Returns ``{"taskId", "status": "done", "unblocked": [taskId], "duplicate": False}``; a
        second call for the same child changes nothing, emits ``delegation.duplicate_wake`` and
        returns ``duplicate: True``. Raises ``ValueError`` for an unknown task or the source task.
        """
        pending: list[tuple[str, dict[str, Any]]] = []
        with self._lock:
            task = self._tasks.get(task_id)
            if task is None:
                raise ValueError(f"unknown task {task_id!r}; known tasks: {', '.join(self._tasks)}")
            if task["parentId"] is None:
                raise ValueError(f"{task_id} is the source task, not a delegated child")
            if task_id in self._completed_children:
                pending.append(("delegation.duplicate_wake", {"taskId": task_id, "parentId": task["parentId"]}))
                outcome = {"taskId": task_id, "status": task["status"], "unblocked": [], "duplicate": True}
            else:
                self._completed_children.add(task_id)
                task["status"] = "done"
                self._comments.append(
                    {
                        "id": f"comment-{len(self._comments) + 1}",
                        "taskId": task_id,
                        "author": task["assignee"] or "delegate",
                        "body": summary,
                        "runId": None,
                        "receiptId": None,
                    }
                )
                unblocked = [
                    other["id"] for other in self._tasks.values() if task_id in other["blockedBy"] and self._refresh_blocked(other)
                ]
                self._bump("eval.delegated_child_completed", self._open_run, "harness", task_id)
                pending.append(("delegation.completed", {"taskId": task_id, "parentId": task["parentId"], "unblocked": unblocked}))
                outcome = {"taskId": task_id, "status": "done", "unblocked": unblocked, "duplicate": False}
        self._emit(pending)
        return outcome

    def cancel(self, actor: str) -> None:
        """Cancel the source task (``actor`` e.g. ``operator`` or ``control_plane``); later agent
        mutations are refused with ``not_allowed``. A second call changes nothing."""
        with self._lock:
            source = self._tasks[SOURCE_TASK]
            if source["status"] != "cancelled":
                source["status"] = "cancelled"
                source["cancelledBy"] = actor
                self._bump("eval.cancelled", self._open_run, "harness", SOURCE_TASK)

    def approve_completion(self) -> None:
        """The human approves the result under review: the source task becomes ``done``.
        Raises ``ValueError`` when it was cancelled. A second call changes nothing."""
        with self._lock:
            source = self._tasks[SOURCE_TASK]
            if source["status"] == "cancelled":
                raise ValueError(f"{SOURCE_TASK} was cancelled; there is nothing to approve")
            if source["status"] != "done":
                source["status"] = "done"
                self._dependency_blocked.pop(SOURCE_TASK, None)
                self._bump("eval.completion_approved", self._open_run, "harness", SOURCE_TASK)

    def snapshot(self) -> dict[str, Any]:
        """The whole board as a JSON-able dict (a deep copy)::

        {"executionId", "caseId",
         "tasks": [{"id", "title", "description", "status", "parentId", "blockedBy", "assignee"}],
         "comments": [{"id", "taskId", "author", "body", "runId", "receiptId"}],
         "documents": [{"key", "taskId", "revision", "title", "body", "runId", "receiptId"}],  # every revision
         "interactions": [{"id", "kind", "status": "pending|answered|rejected|accepted", "taskId",
                           "runId", "answer", "partialAnswer", "answeredItems", "prompt", "origin", ...}],
         "runs": [{"id", "wakeReason", "status": "running|<RUN_STATUSES>", "startedMs", "endedMs"}],
         "runResult": None | {"summary", "disposition", "verifications", "receiptId", "runId"},
         "progress": [{"message", "percent", "runId", "receiptId"}],
         "toolCalls": [{"receiptId", "operation", "readOnly", "outcome": "ok|error|duplicate",
                        "errorCode", "runId", "atMs"}],
         "revision": int,
         "stateHistory": [{"revision", "operation", "runId", "actor": "agent|harness", "taskId"}]}
        """
        with self._lock:
            return copy.deepcopy(
                {
                    "executionId": self.execution_id,
                    "caseId": self.case.get("id"),
                    "tasks": list(self._tasks.values()),
                    "comments": self._comments,
                    "documents": self._documents,
                    "interactions": list(self._interactions.values()),
                    "runs": self._runs,
                    "runResult": self._run_result,
                    "progress": self._progress,
                    "toolCalls": self._tool_calls,
                    "revision": self._revision,
                    "stateHistory": self._history,
                }
            )
