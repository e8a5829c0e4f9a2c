"""Domain errors with their HTTP status, mapped to JSON in one place (coordinator.main)."""

from __future__ import annotations


class CoordinatorError(Exception):
    status = 400
    code = "bad_request"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class NotFound(CoordinatorError):
    status = 404
    code = "not_found"


class UnknownWorker(NotFound):
    code = "unknown_worker"


class Conflict(CoordinatorError):
    status = 409
    code = "conflict"


class NotEnoughData(Conflict):
    code = "not_enough_data"


class GroupFull(Conflict):
    code = "group_full"


class Invalid(CoordinatorError):
    status = 422
    code = "invalid"


class Forbidden(CoordinatorError):
    status = 403
    code = "forbidden"


class TooManyWorkers(CoordinatorError):
    status = 429
    code = "too_many_workers"


class JournalUnavailable(CoordinatorError):
    """A commit failed: nothing of the request was kept; a retry is safe once the disk has room again."""

    status = 503
    code = "journal_unavailable"


class StoreUnavailableError(CoordinatorError):
    """The payload store did not answer a size check: nothing was acknowledged; retry (workers do, with backoff)."""

    status = 503
    code = "store_unavailable"


class WorkerFlagged(Forbidden):
    code = "worker_flagged"


class TaskNotHeld(Conflict):
    code = "task_not_held"


class MemberNotHeld(Conflict):
    code = "member_not_held"


class IncompatibleCheckpoint(Conflict):
    """Another run's checkpoint that does not fit this run: counted, never offered to the learner."""

    code = "incompatible_checkpoint"
