"""What every command that talks to Azure Resource Manager shares: one listing of a resource group,
not-found detection, an SDK model in its REST shape, Azure's errors in
azgpu's terms, and the two ways azgpu waits on ARM (a poller whose first check waits, and a loop
that reads a resource until the operation on it ends).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from ..bounded import BoundedError, loads, retry_after_of
from ..errors import AzgpuError, AzureError
from ..resource_types import ResourceType
from .azure_errors import IN_PROGRESS_REMEDY, OperationInProgressError, translate
from .resource_manager import BASE, arm_url, invalid_answer

TERMINAL = {"succeeded", "failed", "canceled"}
# Without a $filter: a listing filtered by tag leaves out every resource's tags (Resources - List By
# Resource Group, api 2024-11-01), and the tags are how azgpu tells its resources from others.
SOURCE_SKUS = "Azure Resource SKUs API (az vm list-skus --all)"  # read by preflight, reserve, capacity
EXPAND = "createdTime,changedTime,provisioningState"
# The longest wait between two status reads of a long-running operation, whatever Retry-After says (a create
# of GPU scale sets is followed for hours; a poll every minute at most is plenty).
MAX_POLL_WAIT = 60.0


def norm_family(name: str) -> str:
    """Quota family names come with stray spaces and mixed case (facts sheet, section 4)."""
    return name.replace(" ", "").lower()


def list_group(session, resource_group: str) -> list[Any] | None:
    """Every top-level resource of the group (with tags, sku, provisioning state and times), or None
    when the group is missing: one request that finds a cluster, what exists and the quota it holds."""
    try:
        return list(session.resources.resources.list_by_resource_group(resource_group, expand=EXPAND))
    except Exception as exc:
        if is_not_found(exc):
            return None
        raise to_azure_error(exc, f"resource group {resource_group}") from None


def is_not_found(exc: Exception) -> bool:
    return getattr(exc, "status_code", None) == 404


def rest_shape(model: Any) -> dict[str, Any]:
    """An SDK model as Azure's REST body (camelCase, `properties` nested), whatever the SDK's generation.

    The msrest models (azure-mgmt-compute up to 37) give snake_case from as_dict() and the REST shape
    from serialize(); the newer generated models (38 and later) have no serialize() and give the REST
    shape from as_dict(). Flat attributes (model.provisioning_state) work on both.
    """
    serialize = getattr(model, "serialize", None)
    return serialize(keep_readonly=True) if callable(serialize) else model.as_dict()


def to_azure_error(exc: Exception, what: str) -> AzureError:
    if isinstance(exc, AzureError):
        return exc
    from azure.core.exceptions import HttpResponseError, ServiceRequestError, ServiceResponseError

    if isinstance(exc, HttpResponseError):
        return translate(exc, what=what)
    if isinstance(exc, (ServiceRequestError, ServiceResponseError)):
        return AzureError(f"{what}: could not reach Azure: {exc}", code="NETWORK_ERROR",
                          remedy="check the network and re-run; the command continues where it stopped")
    raise exc


def wait_first_polling(interval: float | None, *, default: float = 30,
                       before_delay: Callable[[], None] | None = None,
                       accepted: Callable[[], None] | None = None, first_wait: float = 0.0,
                       final_get: bool = True):
    """ARM's poller, but its first status check waits for Retry-After like every later one.

    azure-core checks an operation's status right after the PUT (or POST). A GPU scale set takes
    minutes and a Run Command at least 20 s, so that check is InProgress: one request for nothing.
    before_delay runs before every wait and may raise to give up (Run Command cannot be cancelled,
    so the health gate stops following it at its deadline); accepted runs once Azure accepted the
    operation (its deadline counts from there, not from a wait for a turn or a throttled retry);
    first_wait: the least the first wait is, whatever Retry-After says (what Learn says the operation
    takes at least). final_get=False: once the status URL says Succeeded, no GET of the resource follows
    (for a PUT whose result azgpu does not read: the deployer only needs to know it succeeded).
    """
    from azure.core.polling.base_polling import LocationPolling, StatusCheckPolling
    from azure.mgmt.core.polling.arm_polling import ARMPolling, AzureAsyncOperationPolling, BodyContentPolling

    class StatusOnly(AzureAsyncOperationPolling):
        def get_final_get_url(self, pipeline_response):  # azure-core's hook
            return None

    class WaitFirstPolling(ARMPolling):
        _waited = False

        def initialize(self, *args, **kwargs) -> None:
            super().initialize(*args, **kwargs)
            if accepted is not None:
                accepted()

        def _extract_delay(self) -> float:
            # Retry-After as bounded.retry_after reads it: 'abc', '-5', 'inf', 'nan' are the poller's own
            # interval, and no answer makes a poll wait longer than MAX_POLL_WAIT.
            delay = retry_after_of(self._pipeline_response.http_response.headers, default=self._timeout,
                                   maximum=MAX_POLL_WAIT)
            return delay if self._waited else max(delay, first_wait)

        def _delay(self) -> None:
            if before_delay is not None:
                before_delay()
            super()._delay()

        def update_status(self) -> None:
            if not self._waited:
                self._delay()
                self._waited = True
            super().update_status()

    algorithms = None if final_get else [StatusOnly(), LocationPolling(), BodyContentPolling(), StatusCheckPolling()]
    return WaitFirstPolling(default if interval is None else interval, lro_algorithms=algorithms)


# The most reads of a resource another operation works on (5 s apart by default: some 14 hours, far longer than any
# create or delete azgpu waits for): a provisioning state that never ends is an error, never an endless wait.
MAX_SETTLE_READS = 10000


def until_settled(session, rt: ResourceType, resource_group: str, name: str, *, interval: float = 5.0,
                  api_version: str | None = None, between: Callable[[], None] | None = None) -> Any | None:
    """Read a resource another operation is working on until its provisioning state is terminal; the
    resource as it then is, or None when it is gone (that operation deleted it). Errors come back in
    azgpu's terms; between() runs before each pause and may raise to stop (Ctrl-C, a deadline)."""
    kwargs = {"api_version": api_version} if api_version else {}
    for _ in range(MAX_SETTLE_READS):
        try:
            current = rt.get(session, resource_group, name, **kwargs)
        except Exception as exc:  # to_azure_error re-raises anything not from Azure
            if is_not_found(exc):
                return None
            raise to_azure_error(exc, name) from None
        if (getattr(current, "provisioning_state", "") or "").lower() in TERMINAL:
            return current
        if between is not None:
            between()
        session.pause(interval)
    state = getattr(current, "provisioning_state", None)
    raise OperationInProgressError(f"{name}: still {ascii(str(state)[:40])} after {MAX_SETTLE_READS:,} reads: azgpu "
                                   "stopped waiting for the operation running on it", code="OPERATION_IN_PROGRESS",
                                   remedy=IN_PROGRESS_REMEDY)


def _rest_client(session):
    """An ARM pipeline with the session's credential, retry policy (and so its throttling budget) and
    transport (--simulate's), but without azure-mgmt-core's automatic resource provider registration
    that the generated clients carry: registering a provider (Microsoft.Impact for Guest Health
    Reporting) is a step of its onboarding (Learn), for the subscription's owner to take, not something
    a call of azgpu's may do on its own."""
    client = session.__dict__.get("_rest_client")
    if client is None:
        from azure.core.pipeline import policies
        from azure.mgmt.core import ARMPipelineClient
        from azure.mgmt.core.policies import ARMChallengeAuthenticationPolicy, ARMHttpLoggingPolicy

        settings = session._kwargs()  # the session's own client settings
        client = ARMPipelineClient(base_url=BASE, transport=settings["transport"], policies=[
            policies.RequestIdPolicy(), policies.HeadersPolicy(), policies.UserAgentPolicy(sdk_moniker="azgpu"),
            policies.ProxyPolicy(), policies.ContentDecodePolicy(), policies.RedirectPolicy(),
            settings["retry_policy"], ARMChallengeAuthenticationPolicy(session.credential, f"{BASE}/.default"),
            policies.CustomHookPolicy(), policies.NetworkTraceLoggingPolicy(), policies.DistributedTracingPolicy(),
            ARMHttpLoggingPolicy()])
        session.__dict__["_rest_client"] = client
    return client


# The largest answer azgpu reads from Azure as JSON: a what-if of a large cluster in full resource payloads
# runs to megabytes; anything beyond this is not an answer azgpu can use.
MAX_ANSWER = 32 * 1024 * 1024
def send(session, method: str, path: str, api_version: str, body: Any = None, url: str | None = None):
    """One REST request to ARM for what no SDK client covers (Guest Health Reporting, permissions):
    the HttpResponse, whatever its status. `url` (a nextLink, a status URL from Azure's answer) must be
    Resource Manager's own (arm_url), else ARM_ANSWER_INVALID and nothing is sent."""
    from azure.core.rest import HttpRequest

    if url is not None and not arm_url(url):
        raise invalid_answer(f"{method} {path}", f"points azgpu to {ascii(str(url)[:100])}, which is not {BASE}")
    target = url or f"{BASE}{path}?api-version={api_version}"
    request = HttpRequest(method, target, json=body) if body is not None else HttpRequest(method, target)
    try:
        return _rest_client(session).send_request(request)
    except AzgpuError:
        raise
    except Exception as exc:
        raise to_azure_error(exc, f"{method} {path}") from None


MAX_PAGES = 10_000  # nextLink pages of one listing (10,000 instances at Azure's smallest page still fit)


def pages(session, path: str, api_version: str, what: str, *, query: str = "",
          error: Callable[[Any, str], Exception] | None = None, missing_ok: bool = False) -> list[dict[str, Any]]:
    """Every item of a listing, its nextLink pages followed, in the REST shape: for listings read for a
    few fields (a scale set's instances, where SDK models cost about 4 ms of CPU each) and for what no
    SDK client covers. A page that is missing or unreadable is an error, never a shorter list (a
    shorter list of instances or impacts would be read as nodes gone or reports never filed); nextLink
    is followed only to Resource Manager (send). `error` makes the exception for a non-200 answer;
    missing_ok: a 404 of the first page (the parent is gone) is an empty listing."""
    from azure.core.exceptions import HttpResponseError

    items: list[dict[str, Any]] = []
    url = f"{BASE}{path}?api-version={api_version}" + (f"&{query}" if query else "")
    followed = {url}
    response = send(session, "GET", path, api_version, url=url)
    if missing_ok and response.status_code == 404:
        return []
    for _ in range(MAX_PAGES):
        if response.status_code != 200:
            raise error(response, what) if error else to_azure_error(HttpResponseError(response=response), what)
        data = answer(response, what)
        value = data.get("value")
        if value is not None and not isinstance(value, list):
            raise invalid_answer(what, f"holds 'value' as {type(value).__name__}, not a list")
        if any(not isinstance(item, dict) for item in value or []):  # dropping it would be a shorter list
            raise invalid_answer(what, "holds an item that is not an object")
        items += value or []
        link = data.get("nextLink")
        if not link:
            return items
        # A page read again would count its items twice (each listed impact costs an insight read).
        if isinstance(link, str) and link in followed:
            raise invalid_answer(what, "points back to a page already read (its nextLink goes round)")
        followed.add(link if isinstance(link, str) else "")
        response = send(session, "GET", path, api_version, url=link)
    raise invalid_answer(what, f"kept pointing to a next page after {MAX_PAGES:,} pages")


def json_body(response) -> dict[str, Any]:
    """The answer's JSON object, or {} when it holds none (an error page, an empty body, or something too
    large or deep to read: bounded.loads, never RecursionError). For an answer that must be read, see answer()."""
    try:
        data = loads(response.text() or "{}", max_bytes=MAX_ANSWER)
    except BoundedError:
        data = {}
    return data if isinstance(data, dict) else {}


def answer(response, what: str) -> dict[str, Any]:
    """A successful answer's JSON object; ARM_ANSWER_INVALID when it is not one azgpu can read."""
    text = response.text() or ""
    if not text.strip():
        return {}
    try:
        data = loads(text, max_bytes=MAX_ANSWER, what="")
    except BoundedError as exc:
        raise invalid_answer(what, str(exc).strip()) from None
    if not isinstance(data, dict):
        raise invalid_answer(what, f"is {type(data).__name__}, not a JSON object")
    return data


def _matches(pattern: str, action: str) -> bool:
    regex = "^" + ".*".join(re.escape(p) for p in pattern.split("*")) + "$"
    return re.match(regex, action, re.IGNORECASE) is not None


def allowed(permissions: list[dict[str, Any]], action: str) -> bool:
    """Learn: "If an action is present in the allowed actions of any permission and not present in the
    disallowed actions of that permission, the user is allowed to do that action" (wildcards, any case)."""
    return any(any(_matches(a, action) for a in p.get("actions") or [])
               and not any(_matches(n, action) for n in p.get("notActions") or [])
               for p in permissions)
