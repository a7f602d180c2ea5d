"""Long-running operations as their status URLs report them: Azure-AsyncOperation (a PUT's status), a
Location (a DELETE's or an action's result), each polled on the fake's clock (the model behind
routes/operations.py; lro.py starts and finishes them)."""

from __future__ import annotations

from ..errors import ArmError
from ..messages import Response


def find(backend, op_id: str) -> dict:
    op = backend.store.operations.get(op_id)
    if op is None:
        raise ArmError(404, "OperationNotFound", f"The operation '{op_id}' was not found.")
    return op


def status(backend, op: dict) -> Response:
    op = backend.ops.poll(op)
    headers = {"Retry-After": backend.ops.retry_after(op)} if op["status"] == "InProgress" else {}
    return Response(200, backend.ops.status_body(op), headers)


def monitor(backend, op: dict) -> Response:
    """An action's Location (?monitor=true): the result itself once done."""
    backend.ops.poll(op)
    if op["status"] == "InProgress":
        return Response(202, None, {"Location": backend.ops.url(op, monitor=True),
                                    "Retry-After": backend.ops.retry_after(op)})
    if op["status"] == "Failed":
        return Response(400, {"error": op["error"]})
    return Response(200, op["result"]) if op.get("result") is not None else Response(204)


def result(backend, op: dict) -> Response:
    backend.ops.poll(op)
    if op["status"] == "InProgress":
        return Response(202, None, backend.ops.headers(op))
    if op["status"] == "Failed":
        # A Location monitor reports failure as an error answer; 400 so the SDK does not retry it.
        return Response(400, {"error": op["error"]})
    # An operation with a result (a what-if) answers it once done, as its Location is documented to.
    return Response(200, op["result"]) if op.get("result") is not None else Response(204)
