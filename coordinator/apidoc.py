"""The OpenAPI document's prose: what a client must know beyond the schemas (auth, errors, file contracts)."""

API_DESCRIPTION = """\
The coordinator of an rlfleet run. Workers (collectors, a learner, an evaluator) register, hold a lease
renewed by heartbeats, claim a task, and report what they did; experience and policies travel as files in a
shared payload store, and only their metadata passes through this API.

**Authentication.** Every `/v1` route but `/v1/schemas` needs `Authorization: Bearer <token>`, one token per
scope: `collector`, `learner`, `evaluator`, `admin` (may do everything) and `read` (any valid token may read).
Each operation names the scope it needs. A missing or unknown token is `401 unauthorized`, a token of another
scope `403 forbidden`. Public routes (`/healthz`, `/readyz`, `/metrics`, `/v1/schemas`) need none.

**Errors** are JSON `{"error": "<code>", "message": "<what to change>"}`; each operation lists its codes.

**File contracts** (versioned JSON Schemas, public):
[`/v1/schemas/chunk`](/v1/schemas/chunk) is the chunk payload a collector writes to the store
(the `rlfleet.chunk` msgpack envelope, columns, dtypes, shapes);
[`/v1/schemas/policy`](/v1/schemas/policy) is the policy file's manifest and tensor layout.
The collector protocol (store layout, register, claim, heartbeat long poll, pause, chunk reports, retries)
is described in the repository's `docs/protocol.md`.
"""
