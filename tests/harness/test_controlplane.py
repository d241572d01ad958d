"""The per-execution control plane: typed operations, receipts, events, the human side."""

from __future__ import annotations

import json
import threading

import pytest

from runs.executors.live.contracts import EventLog
from runs.executors.live.controlplane import ControlPlane
from runs.executors.live.operations import ANSWER_SCHEMAS, INTERACTION_KINDS, argument_problems

pytestmark = pytest.mark.database_free

CASE = {"id": "governed-interaction", "title": "Park and resume governed interactions", "steps": [], "assertions": {}}
PROMPT = "Ask one question with request_human_input, use the answer, then finish_task."


@pytest.fixture
def board() -> ControlPlane:
    return ControlPlane(execution_id="exec-1", case=CASE, prompt=PROMPT, events=EventLog())


def events_of(board: ControlPlane, *types: str) -> list[tuple[str, dict]]:
    return [(e.type, dict(e.data)) for e in board.events.events() if not types or e.type in types]


def ok(outcome: dict) -> dict:
    assert outcome["ok"], outcome
    return outcome["result"]


def ask(board: ControlPlane, **arguments) -> str:
    return ok(board.call("request_human_input", arguments))["interactionId"]


# --------------------------------------------------------------------------- the board and its operations


def test_a_new_board_holds_the_source_task_with_the_case_prompt(board):
    snapshot = board.snapshot()
    assert snapshot["tasks"] == [
        {
            "id": "task-1",
            "title": "Park and resume governed interactions",
            "description": PROMPT,
            "status": "todo",
            "parentId": None,
            "blockedBy": [],
            "assignee": "actor-1",
        }
    ]
    assert snapshot["revision"] == 1
    assert snapshot["stateHistory"] == [
        {"revision": 1, "operation": "board.created", "runId": None, "actor": "harness", "taskId": "task-1"}
    ]
    assert snapshot["runResult"] is None
    assert snapshot["executionId"] == "exec-1"
    assert snapshot["caseId"] == "governed-interaction"
    json.dumps(snapshot)


def test_operations_are_listed_in_a_stable_order_with_closed_schemas(board):
    operations = board.operations()
    assert [op["name"] for op in operations] == [
        "report_progress",
        "write_document",
        "request_human_input",
        "finish_task",
        "request_review",
        "block_task",
        "create_task",
        "set_dependencies",
        "get_task_context",
        "get_task_history",
        "list_documents",
        "read_document",
        "search_tasks",
        "list_agents",
        "get_agent",
    ]
    for op in operations:
        schema = op["inputSchema"]
        assert schema["type"] == "object" and schema["additionalProperties"] is False, op["name"]
        assert ("idempotencyKey" in schema["properties"]) is (not op["readOnly"]), op["name"]
        assert ("expectedRevision" in schema["properties"]) is (not op["readOnly"]), op["name"]
        assert op["description"]
    operations[0]["inputSchema"]["properties"].clear()
    assert board.operations()[0]["inputSchema"]["properties"], "operations() hands out copies"


def test_a_schema_error_lists_every_problem_and_changes_nothing(board):
    outcome = board.call(
        "request_human_input",
        {"kind": "questions", "prompt": "", "options": ["a", "a"], "colour": "red", "items": [{"id": "x"}]},
    )
    assert outcome == {
        "ok": False,
        "receiptId": "rcpt-1",
        "error": {
            "code": "schema_error",
            "message": "Invalid arguments for request_human_input: 7 problem(s). Fix them all and call request_human_input again.",
            "details": [
                "arguments: Additional properties are not allowed ('colour' was unexpected)",
                "items[0]: 'text' is a required property",
                "prompt: '' should be non-empty",
                "questions: kind 'questions' needs 'questions'",
                "options: not used by kind 'questions'; remove it",
                "items: not used by kind 'questions'; remove it",
                "options: options must be unique; repeated: a",
            ],
        },
    }
    assert board.snapshot()["revision"] == 1
    assert board.pending_interactions() == []


@pytest.mark.parametrize("arguments", ["finish it", [1, 2], 7, True])
def test_arguments_that_are_not_an_object_are_a_schema_error_not_an_exception(board, arguments):
    outcome = board.call("report_progress", arguments)
    assert outcome["error"]["code"] == "schema_error"
    assert outcome["error"]["details"][0].startswith("arguments: ")


def test_missing_arguments_count_as_an_empty_object(board):
    assert board.call("finish_task", None)["error"]["details"] == ["arguments: 'summary' is a required property"]
    assert ok(board.call("list_agents", None))["agents"][0]["id"] == "actor-1"


def test_an_unknown_operation_names_the_known_ones(board):
    outcome = board.call("rm_rf", {})
    assert outcome["error"]["code"] == "unknown_operation"
    assert outcome["error"]["message"] == "There is no operation 'rm_rf'."
    assert "finish_task" in outcome["error"]["details"][0]
    assert board.snapshot()["toolCalls"][0]["outcome"] == "error"


def test_every_call_gets_a_receipt_and_a_tool_call_record(board):
    board.begin_run("start")
    board.call("report_progress", {"message": "reading"})
    board.call("get_task_context", {})
    board.call("finish_task", {"summary": 3})
    calls = board.snapshot()["toolCalls"]
    assert [(c["receiptId"], c["operation"], c["readOnly"], c["outcome"], c["errorCode"], c["runId"]) for c in calls] == [
        ("rcpt-1", "report_progress", False, "ok", None, "run-1"),
        ("rcpt-2", "get_task_context", True, "ok", None, "run-1"),
        ("rcpt-3", "finish_task", False, "error", "schema_error", "run-1"),
    ]
    assert all(isinstance(c["atMs"], int) for c in calls)


def test_mutations_bump_the_revision_and_reads_do_not(board):
    board.begin_run("start")
    ok(board.call("report_progress", {"message": "one"}))
    ok(board.call("get_task_context", {}))
    ok(board.call("list_documents", {}))
    result = ok(board.call("write_document", {"key": "notes", "body": "n"}))
    assert result["revision"] == 3
    snapshot = board.snapshot()
    assert snapshot["revision"] == 3
    assert [(h["revision"], h["operation"], h["runId"], h["actor"]) for h in snapshot["stateHistory"]] == [
        (1, "board.created", None, "harness"),
        (2, "report_progress", "run-1", "agent"),
        (3, "write_document", "run-1", "agent"),
    ]
    assert events_of(board, "research.completed") == [
        ("research.completed", {"operation": "get_task_context", "receiptId": "rcpt-2", "runId": "run-1"}),
        ("research.completed", {"operation": "list_documents", "receiptId": "rcpt-3", "runId": "run-1"}),
    ]


# --------------------------------------------------------------------------- idempotency and revisions


def test_the_same_idempotency_key_returns_the_first_result_and_changes_nothing(board):
    first = board.call("report_progress", {"message": "halfway", "idempotencyKey": "k1"})
    second = board.call("report_progress", {"message": "halfway", "idempotencyKey": "k1", "expectedRevision": 0})
    assert first["duplicate"] is False
    assert second == {"ok": True, "receiptId": "rcpt-2", "result": first["result"], "duplicate": True}
    snapshot = board.snapshot()
    assert len(snapshot["progress"]) == 1
    assert snapshot["revision"] == 2
    assert [c["outcome"] for c in snapshot["toolCalls"]] == ["ok", "duplicate"]
    assert board.events.types() == ["run.progress.reported"]


def test_an_idempotency_key_reused_for_another_call_is_a_conflict(board):
    ok(board.call("report_progress", {"message": "halfway", "idempotencyKey": "k1"}))
    outcome = board.call("report_progress", {"message": "almost", "idempotencyKey": "k1"})
    assert outcome["error"]["code"] == "conflict"
    assert outcome["error"]["message"] == (
        "idempotencyKey 'k1' was already used by rcpt-1 for a different call; use a new key for a new call."
    )
    assert len(board.snapshot()["progress"]) == 1


def test_a_stale_expected_revision_is_a_conflict(board):
    ok(board.call("report_progress", {"message": "one", "expectedRevision": 1}))
    stale = board.call("report_progress", {"message": "two", "expectedRevision": 1})
    assert stale["error"] == {
        "code": "conflict",
        "message": "expectedRevision 1 is stale: the board is at revision 2. Read it again (get_task_context) and retry.",
        "details": [],
    }
    ok(board.call("report_progress", {"message": "two", "expectedRevision": 2}))


# --------------------------------------------------------------------------- results, reviews, documents


@pytest.mark.parametrize(("disposition", "status"), [("done", "done"), ("needs_review", "in_review"), ("blocked", "blocked")])
def test_finish_task_proposes_then_accepts_and_comments_the_summary(board, disposition, status):
    run_id = board.begin_run("start")
    summary = "I changed the parser and verified it; " * 20
    result = ok(
        board.call(
            "finish_task",
            {
                "summary": summary,
                "disposition": disposition,
                "verifications": [{"name": "unit tests", "status": "not_run", "reason": "tool_unavailable"}],
            },
        )
    )
    assert result == {"taskId": "task-1", "disposition": disposition, "taskStatus": status, "commentId": "comment-1", "revision": 2}
    snapshot = board.snapshot()
    assert snapshot["runResult"] == {
        "summary": summary,
        "disposition": disposition,
        "verifications": [{"name": "unit tests", "status": "not_run", "reason": "tool_unavailable"}],
        "receiptId": "rcpt-1",
        "runId": run_id,
    }
    assert [(c["taskId"], c["author"], c["body"]) for c in snapshot["comments"]] == [("task-1", "agent", summary)]
    assert snapshot["tasks"][0]["status"] == status
    assert events_of(board) == [
        ("run.result.proposed", {"receiptId": "rcpt-1", "runId": "run-1"}),
        ("run.result.accepted", {"receiptId": "rcpt-1", "runId": "run-1", "disposition": disposition, "verificationCount": 1}),
    ]
    assert summary not in json.dumps([e.data for e in board.events.events()]), "event data carries no long text"


def test_an_invalid_result_is_proposed_then_rejected_and_the_agent_can_fix_it(board):
    board.begin_run("start")
    bad = board.call("finish_task", {"summary": "done", "verifications": [{"name": "tests", "status": "green"}]})
    assert bad["error"]["details"] == ["verifications[0].status: 'green' is not one of ['passed', 'failed', 'not_run']"]
    ok(board.call("finish_task", {"summary": "done", "verifications": [{"name": "tests", "status": "passed"}]}))
    assert board.events.types() == [
        "run.result.proposed",
        "run.result.rejected",
        "run.result.proposed",
        "run.result.accepted",
    ]
    assert events_of(board, "run.result.rejected")[0][1] == {
        "receiptId": "rcpt-1",
        "runId": "run-1",
        "code": "schema_error",
        "problemCount": 1,
    }
    assert len(board.snapshot()["comments"]) == 1


def test_a_second_result_in_the_same_run_is_a_conflict_but_a_new_run_may_finish_again(board):
    board.begin_run("start")
    ok(board.call("finish_task", {"summary": "first", "disposition": "needs_review"}))
    second = board.call("finish_task", {"summary": "second"})
    assert second["error"]["code"] == "conflict"
    assert second["error"]["message"] == ("This run already has an accepted result (rcpt-1); finish_task is called once per run.")
    assert board.events.types()[-2:] == ["run.result.proposed", "run.result.rejected"]
    replay_of_first = board.call("finish_task", {"summary": "first"})
    assert replay_of_first["error"]["code"] == "conflict"
    board.end_run("succeeded")
    board.begin_run("review_rejected")
    ok(board.call("finish_task", {"summary": "revised"}))
    snapshot = board.snapshot()
    assert snapshot["runResult"]["summary"] == "revised"
    assert snapshot["runResult"]["runId"] == "run-2"
    assert [c["body"] for c in snapshot["comments"]] == ["first", "revised"]


def test_finish_task_is_for_the_source_task_only(board):
    child = ok(board.call("create_task", {"title": "Port the parser", "description": "Port it."}))["taskId"]
    outcome = board.call("finish_task", {"summary": "done", "taskId": child})
    assert outcome["error"]["code"] == "not_allowed"
    assert board.call("finish_task", {"summary": "done", "taskId": "task-9"})["error"]["code"] == "not_found"


def test_documents_keep_every_revision_and_the_plan_emits_plan_updated(board):
    ok(board.call("write_document", {"key": "plan", "body": "v1", "title": "Plan"}))
    result = ok(board.call("write_document", {"key": "plan", "body": "v2"}))
    assert result["documentRevision"] == 2
    ok(board.call("write_document", {"key": "notes", "body": "n"}))
    assert events_of(board, "plan.updated") == [
        ("plan.updated", {"taskId": "task-1", "key": "plan", "revision": 1, "receiptId": "rcpt-1"}),
        ("plan.updated", {"taskId": "task-1", "key": "plan", "revision": 2, "receiptId": "rcpt-2"}),
    ]
    assert ok(board.call("read_document", {"key": "plan"})) == {
        "key": "plan",
        "taskId": "task-1",
        "revision": 2,
        "title": "Plan",
        "body": "v2",
    }
    assert ok(board.call("list_documents", {}))["documents"] == [
        {"key": "plan", "title": "Plan", "revision": 2},
        {"key": "notes", "title": "notes", "revision": 1},
    ]
    assert [(d["key"], d["revision"]) for d in board.snapshot()["documents"]] == [("plan", 1), ("plan", 2), ("notes", 1)]
    missing = board.call("read_document", {"key": "design"})
    assert missing["error"] == {
        "code": "not_found",
        "message": "task-1 has no document 'design'.",
        "details": ["existing keys: plan, notes"],
    }


def test_request_review_waits_in_review_until_the_human_decides(board):
    board.begin_run("start")
    first = ok(board.call("request_review", {"summary": "Please confirm the external check."}))
    assert first["taskStatus"] == "in_review"
    assert events_of(board, "interaction.requested") == [
        ("interaction.requested", {"interactionId": "interaction-1", "kind": "confirmation", "taskId": "task-1", "receiptId": "rcpt-1"})
    ]
    rejected = board.decide_review("interaction-1", "reject", "Only re-run the verification.")
    assert rejected["status"] == "rejected"
    assert rejected["answer"] == {"confirmed": False, "note": "Only re-run the verification."}
    assert board.snapshot()["tasks"][0]["status"] == "in_progress"
    ok(board.call("request_review", {"summary": "Verification re-run."}))
    approved = board.decide_review("interaction-2", "approve", "")
    assert approved["status"] == "accepted"
    snapshot = board.snapshot()
    assert snapshot["tasks"][0]["status"] == "done"
    assert [h["operation"] for h in snapshot["stateHistory"] if h["actor"] == "harness"] == [
        "board.created",
        "eval.review_rejected",
        "eval.review_approved",
    ]
    with pytest.raises(ValueError, match="interaction-2 is no longer pending \\(it is accepted\\)"):
        board.decide_review("interaction-2", "approve", "")
    with pytest.raises(ValueError, match="unknown review decision 'maybe'"):
        board.decide_review("interaction-1", "maybe", "")


def test_a_needs_review_result_is_done_once_the_human_approves_completion(board):
    board.begin_run("start")
    ok(board.call("finish_task", {"summary": "Needs an external check.", "disposition": "needs_review"}))
    assert board.snapshot()["tasks"][0]["status"] == "in_review"
    board.approve_completion()
    board.approve_completion()
    snapshot = board.snapshot()
    assert snapshot["tasks"][0]["status"] == "done"
    assert [h["operation"] for h in snapshot["stateHistory"]].count("eval.completion_approved") == 1


# --------------------------------------------------------------------------- interactions and typed answers


def test_questions_are_answered_with_one_of_their_options_in_parts(board):
    board.begin_run("start")
    interaction_id = ask(
        board,
        kind="questions",
        prompt="Two choices",
        questions=[{"id": "db", "text": "Which database?", "options": ["sqlite", "postgres"]}, {"id": "why", "text": "Why?"}],
    )
    assert events_of(board, "interaction.requested")[0][1] == {
        "interactionId": "interaction-1",
        "kind": "questions",
        "taskId": "task-1",
        "receiptId": "rcpt-1",
    }
    [pending] = board.pending_interactions()
    assert (pending["id"], pending["kind"], pending["runId"], pending["answeredItems"]) == (
        "interaction-1",
        "questions",
        "run-1",
        [],
    )
    with pytest.raises(ValueError, match="answer 'mysql' to 'db' is not one of its options: sqlite, postgres"):
        board.answer_interaction(interaction_id, {"answers": {"db": "mysql"}})
    with pytest.raises(ValueError, match="unknown question 'colour'"):
        board.answer_interaction(interaction_id, {"answers": {"colour": "red"}})
    with pytest.raises(ValueError, match=r"interaction-1 still lacks an answer for: why \(answer them, or pass partial=True"):
        board.answer_interaction(interaction_id, {"answers": {"db": "sqlite"}})
    part = board.answer_interaction(interaction_id, {"answers": {"db": "sqlite"}}, partial=True)
    assert (part["status"], part["answeredItems"], part["partialAnswer"]) == (
        "pending",
        ["db"],
        {"answers": {"db": "sqlite"}},
    )
    done = board.answer_interaction(interaction_id, {"answers": {"why": "it is small"}})
    assert done["status"] == "answered"
    assert done["answer"] == {"answers": {"db": "sqlite", "why": "it is small"}}
    assert board.pending_interactions() == []
    context = ok(board.call("get_task_context", {}))
    assert context["interactions"][0]["answer"] == {"answers": {"db": "sqlite", "why": "it is small"}}


def test_suggested_tasks_are_accepted_by_index_or_title_and_the_rest_rejected(board):
    interaction_id = ask(board, kind="suggest_tasks", prompt="Which follow-ups?", options=["Add tests", "Write docs", "Refactor"])
    with pytest.raises(ValueError, match="no suggestion 7"):
        board.answer_interaction(interaction_id, {"accepted": [7]})
    with pytest.raises(ValueError, match="suggestions both accepted and rejected: Add tests"):
        board.answer_interaction(interaction_id, {"accepted": [0], "rejected": ["Add tests"]})
    with pytest.raises(ValueError, match="accept or reject at least one suggestion"):
        board.answer_interaction(interaction_id, {"accepted": []})
    answered = board.answer_interaction(interaction_id, {"accepted": [0, "Refactor"]})
    assert answered["answer"] == {"accepted": ["Add tests", "Refactor"], "rejected": ["Write docs"]}
    assert len(board.snapshot()["tasks"]) == 1, "accepting a suggestion does not create tasks"


def test_checkbox_answers_name_existing_options(board):
    interaction_id = ask(board, kind="checkbox", prompt="Which apply?", options=["fast", "safe", "cheap"])
    with pytest.raises(ValueError, match="unknown option\\(s\\) 'free'"):
        board.answer_interaction(interaction_id, {"checked": ["free"]})
    board.answer_interaction(interaction_id, {"checked": ["safe"]}, partial=True)
    answered = board.answer_interaction(interaction_id, {"checked": ["fast"]})
    assert answered["answer"] == {"checked": ["fast", "safe"]}


def test_item_verdicts_stay_pending_until_every_item_has_a_verdict(board):
    interaction_id = ask(
        board,
        kind="item_verdicts",
        prompt="Review these",
        items=[{"id": "a", "text": "Rename"}, {"id": "b", "text": "Delete"}, {"id": "c", "text": "Move"}],
    )
    part = board.answer_interaction(interaction_id, {"verdicts": {"b": "reject"}}, partial=True)
    assert part["status"] == "pending"
    assert part["answeredItems"] == ["b"]
    assert board.pending_interactions()[0]["answeredItems"] == ["b"]
    with pytest.raises(ValueError, match="still lacks an answer for: c"):
        board.answer_interaction(interaction_id, {"verdicts": {"a": "accept"}})
    with pytest.raises(ValueError, match="verdicts.a: 'maybe' is not one of \\['accept', 'reject'\\]"):
        board.answer_interaction(interaction_id, {"verdicts": {"a": "maybe"}})
    with pytest.raises(ValueError, match="unknown item\\(s\\) 'z'"):
        board.answer_interaction(interaction_id, {"verdicts": {"z": "accept"}})
    done = board.answer_interaction(interaction_id, {"verdicts": {"a": "accept", "c": "accept"}})
    assert done["status"] == "answered"
    assert done["answer"] == {"verdicts": {"a": "accept", "b": "reject", "c": "accept"}}
    assert [h["operation"] for h in board.snapshot()["stateHistory"]][-2:] == [
        "eval.interaction_partially_answered",
        "eval.interaction_answered",
    ]


def test_a_confirmation_is_answered_whole(board):
    interaction_id = ask(board, kind="confirmation", prompt="Ship it?")
    with pytest.raises(ValueError, match="cannot be answered partially"):
        board.answer_interaction(interaction_id, {"confirmed": True}, partial=True)
    with pytest.raises(ValueError, match="confirmed: 'yes' is not of type 'boolean'"):
        board.answer_interaction(interaction_id, {"confirmed": "yes"})
    answered = board.answer_interaction(interaction_id, {"confirmed": True, "note": "go"})
    assert (answered["status"], answered["answer"]) == ("accepted", {"confirmed": True, "note": "go"})
    assert board.snapshot()["tasks"][0]["status"] == "todo", "a confirmation asked with request_human_input moves no task"


def test_answers_of_the_wrong_shape_name_every_problem(board):
    interaction_id = ask(board, kind="questions", prompt="Q", questions=[{"id": "q1", "text": "Why?"}])
    with pytest.raises(ValueError) as raised:
        board.answer_interaction(interaction_id, {"answer": "because", "checked": []})
    assert str(raised.value) == (
        "invalid questions answer for interaction-1: arguments: 'answers' is a required property; "
        "arguments: Additional properties are not allowed ('answer', 'checked' were unexpected)"
    )
    with pytest.raises(ValueError, match="unknown interaction 'interaction-9'; pending: interaction-1"):
        board.answer_interaction("interaction-9", {"answers": {"q1": "x"}})


@pytest.mark.parametrize("kind", INTERACTION_KINDS)
def test_every_interaction_kind_has_an_answer_schema(kind):
    assert ANSWER_SCHEMAS[kind]["additionalProperties"] is False


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({"kind": "checkbox", "prompt": "p"}, "options: kind 'checkbox' needs 'options'"),
        ({"kind": "item_verdicts", "prompt": "p"}, "items: kind 'item_verdicts' needs 'items'"),
        ({"kind": "suggest_tasks", "prompt": "p"}, "options: kind 'suggest_tasks' needs 'options'"),
        ({"kind": "confirmation", "prompt": "p", "options": ["y"]}, "options: not used by kind 'confirmation'; remove it"),
        (
            {"kind": "item_verdicts", "prompt": "p", "items": [{"id": "a", "text": "x"}, {"id": "a", "text": "y"}]},
            "items: ids must be unique; repeated: a",
        ),
        (
            {"kind": "questions", "prompt": "p", "questions": [{"id": "q", "text": "t", "options": ["x", "x"]}]},
            "questions[0].options: options must be unique; repeated: x",
        ),
    ],
)
def test_each_interaction_kind_needs_its_own_fields(arguments, problem):
    assert argument_problems("request_human_input", arguments) == [problem]


# --------------------------------------------------------------------------- delegation and dependencies


def test_a_delegated_child_blocks_its_parent_until_the_control_plane_completes_it(board):
    board.begin_run("start")
    child = ok(board.call("create_task", {"title": "Port the parser", "description": "Port it.", "assignee": "agent-opencode"}))
    assert child == {"taskId": "task-2", "parentId": "task-1", "taskStatus": "todo", "revision": 2}
    deps = ok(board.call("set_dependencies", {"taskId": "task-1", "blockedBy": ["task-2"]}))
    assert deps["taskStatus"] == "blocked"
    board.end_run("blocked")

    completion = board.complete_child("task-2", "Parser ported; tests pass.")
    assert completion == {"taskId": "task-2", "status": "done", "unblocked": ["task-1"], "duplicate": False}
    tasks = {t["id"]: t for t in board.snapshot()["tasks"]}
    assert tasks["task-1"]["status"] == "in_progress"
    assert tasks["task-2"]["status"] == "done"

    board.begin_run("blockers_resolved")
    again = board.complete_child("task-2", "Parser ported; tests pass.")
    assert again["duplicate"] is True
    assert events_of(board, "delegation.created", "task.dependencies.updated", "delegation.completed", "delegation.duplicate_wake") == [
        ("delegation.created", {"taskId": "task-2", "parentId": "task-1", "assignee": "agent-opencode", "receiptId": "rcpt-1"}),
        ("task.dependencies.updated", {"taskId": "task-1", "blockedBy": ["task-2"], "receiptId": "rcpt-2"}),
        ("delegation.completed", {"taskId": "task-2", "parentId": "task-1", "unblocked": ["task-1"]}),
        ("delegation.duplicate_wake", {"taskId": "task-2", "parentId": "task-1"}),
    ]
    history = [h["operation"] for h in board.snapshot()["stateHistory"]]
    assert history.count("eval.delegated_child_completed") == 1
    ok(board.call("finish_task", {"summary": "Parser integrated."}))
    with pytest.raises(ValueError, match="task-1 is the source task"):
        board.complete_child("task-1", "x")
    with pytest.raises(ValueError, match="unknown task 'task-7'"):
        board.complete_child("task-7", "x")


def test_dependencies_refuse_unknown_tasks_self_blocks_and_cycles(board):
    ok(board.call("create_task", {"title": "A", "description": "a"}))
    ok(board.call("create_task", {"title": "B", "description": "b"}))
    assert board.call("set_dependencies", {"taskId": "task-2", "blockedBy": ["task-5"]})["error"] == {
        "code": "not_found",
        "message": "Unknown blocking task(s): task-5.",
        "details": ["known tasks: task-1, task-2, task-3"],
    }
    assert board.call("set_dependencies", {"taskId": "task-2", "blockedBy": ["task-2"]})["error"]["code"] == "not_allowed"
    ok(board.call("set_dependencies", {"taskId": "task-2", "blockedBy": ["task-3"]}))
    cycle = board.call("set_dependencies", {"taskId": "task-3", "blockedBy": ["task-2"]})
    assert cycle["error"]["message"] == "Dependency cycle: task-2 already wait(s) for task-3."
    cleared = ok(board.call("set_dependencies", {"taskId": "task-2", "blockedBy": []}))
    assert cleared["taskStatus"] == "todo"


def test_an_unknown_assignee_is_refused_with_the_roster(board):
    outcome = board.call("create_task", {"title": "A", "description": "a", "assignee": "opencode"})
    assert outcome["error"]["code"] == "not_found"
    assert outcome["error"]["details"] == ["known agents: actor-1, agent-codex, agent-opencode, agent-acpx (see list_agents)"]
    assert ok(board.call("get_agent", {"agentId": "agent-acpx"}))["agent"]["provider"] == "acpx"
    assert board.call("get_agent", {"agentId": "nobody"})["error"]["code"] == "not_found"


def test_search_and_history_read_the_board(board):
    ok(board.call("create_task", {"title": "Port the parser", "description": "Port it to Rust."}))
    ok(board.call("block_task", {"reason": "waiting for access", "taskId": "task-2"}))
    found = ok(board.call("search_tasks", {"query": "RUST"}))
    assert found["tasks"] == [{"id": "task-2", "title": "Port the parser", "status": "blocked", "parentId": "task-1"}]
    history = ok(board.call("get_task_history", {"taskId": "task-2"}))
    assert [e["operation"] for e in history["entries"]] == ["create_task", "block_task"]
    assert board.call("get_task_history", {"taskId": "task-3"})["error"]["code"] == "not_found"


# --------------------------------------------------------------------------- runs, cancel, concurrency


def test_runs_are_numbered_and_validated(board):
    assert board.current_run_id is None
    assert board.begin_run("start") == "run-1"
    assert board.snapshot()["tasks"][0]["status"] == "in_progress"
    with pytest.raises(ValueError, match="run-1 is still open"):
        board.begin_run("steer")
    board.end_run("yielded")
    with pytest.raises(ValueError, match="no run is open"):
        board.end_run("succeeded")
    with pytest.raises(ValueError, match="unknown wake reason 'nap'"):
        board.begin_run("nap")
    with pytest.raises(ValueError, match="unknown run status 'meh'"):
        board.end_run("meh")
    assert board.begin_run("interaction_resolved") == "run-2"
    board.end_run("succeeded")
    assert [(r["id"], r["wakeReason"], r["status"]) for r in board.snapshot()["runs"]] == [
        ("run-1", "start", "yielded"),
        ("run-2", "interaction_resolved", "succeeded"),
    ]


def test_after_cancel_the_agent_can_read_but_not_change_the_board(board):
    board.begin_run("start")
    board.cancel("operator")
    board.cancel("operator")
    refused = board.call("finish_task", {"summary": "done anyway"})
    assert refused["error"] == {"code": "not_allowed", "message": "task-1 was cancelled; stop working and end your turn.", "details": []}
    assert ok(board.call("get_task_context", {}))["task"]["status"] == "cancelled"
    snapshot = board.snapshot()
    assert snapshot["runResult"] is None
    assert [h["operation"] for h in snapshot["stateHistory"]] == ["board.created", "eval.cancelled"]
    with pytest.raises(ValueError, match="was cancelled"):
        board.approve_completion()


def test_the_snapshot_is_a_copy(board):
    snapshot = board.snapshot()
    snapshot["tasks"][0]["status"] = "done"
    assert board.snapshot()["tasks"][0]["status"] == "todo"


def test_concurrent_calls_get_unique_receipts_and_revisions(board):
    def worker(n: int) -> None:
        for i in range(25):
            board.call("report_progress", {"message": f"{n}-{i}"})
            board.call("get_task_context", {})

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    snapshot = board.snapshot()
    receipts = [c["receiptId"] for c in snapshot["toolCalls"]]
    assert len(receipts) == len(set(receipts)) == 400
    assert snapshot["revision"] == 201
    assert [h["revision"] for h in snapshot["stateHistory"]] == list(range(1, 202))
    assert len(snapshot["progress"]) == 200
    assert board.events.types().count("run.progress.reported") == 200


def test_a_listener_may_answer_an_interaction_as_soon_as_it_is_requested(board):
    answers = []

    def listener(event):
        if event.type == "interaction.requested":
            answers.append(board.answer_interaction(event.data["interactionId"], {"confirmed": True}))

    board.events.listeners.append(listener)
    ask(board, kind="confirmation", prompt="Go?")
    assert answers[0]["status"] == "accepted"
