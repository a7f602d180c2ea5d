"""Status URLs of long-running operations: Azure-AsyncOperation (PUT) and Location (DELETE)."""

from __future__ import annotations

from ..errors import ArmError
from . import AS_STARTED, SUB, Response, route

# A status URL carries the api-version of the request that started its operation.
API_VERSION = AS_STARTED

PROVIDER_LOCATION = SUB + r"/providers/(?P<provider>[^/]+)/locations/(?P<location>[^/]+)"


def _op(backend, op_id: str) -> dict:
    op = backend.store.operations.get(op_id)
    if op is None:
        raise ArmError(404, "OperationNotFound", f"The operation '{op_id}' was not found.")
    return op


@route("GET", PROVIDER_LOCATION + r"/operations/(?P<op_id>[^/]+)")
def operation_status(backend, req, sub, provider, location, op_id):
    if req.query.get("monitor") == "true":  # an action's Location: the result itself once done
        return _monitor(backend, _op(backend, op_id))
    op = backend.ops.poll(_op(backend, op_id))
    headers = {"Retry-After": backend.ops.retry_after(op)} if op["status"] == "InProgress" else {}
    return Response(200, backend.ops.status_body(op), headers)


def _monitor(backend, op: dict) -> Response:
    backend.ops.poll(op)
    if op["status"] == "InProgress":
        return Response(202, None,
                        {"Location": backend.ops.url(op, monitor=True), "Retry-After": backend.ops.retry_after(op)})
    if op["status"] == "Failed":
        return Response(400, {"error": op["error"]})
    return Response(200, op["result"]) if op.get("result") is not None else Response(204)


def _result(backend, op: dict) -> Response:
    backend.ops.poll(op)
    if op["status"] == "InProgress":
        return Response(202, None, backend.ops.headers(op))
    if op["status"] == "Failed":
        # A Location monitor reports failure as an error answer; 400 so the SDK does not retry it.
        return Response(400, {"error": op["error"]})
    # An operation with a result (a what-if) answers it once done, as its Location is documented to.
    return Response(200, op["result"]) if op.get("result") is not None else Response(204)


@route("GET", PROVIDER_LOCATION + r"/operationResults/(?P<op_id>[^/]+)")
def provider_operation_result(backend, req, sub, provider, location, op_id):
    return _result(backend, _op(backend, op_id))


@route("GET", SUB + r"/operationresults/(?P<op_id>[^/]+)")
def operation_result(backend, req, sub, op_id):
    return _result(backend, _op(backend, op_id))
