"""The fake parses a large body sent again and again (the node check's 48 KB script in every node's Run Command)
once, yet each request still gets a body of its own: a route or a test that changes one request's body (or its
entry in the request log) never changes another's."""

from __future__ import annotations

import json

from fake_azure_support import RG

from azgpu.testing import transport


def test_a_repeated_large_body_is_each_requests_own():
    raw = json.dumps({"commandId": "RunShellScript", "script": [f"echo {i}" * 20 for i in range(200)],
                      "nested": {"list": [1, {"a": [2]}]}}).encode()
    assert len(raw) >= transport._PARSE_ONCE_FROM
    bodies = []
    for _ in range(3):  # the first parsed, the others from what was parsed
        body = transport._json_body(raw)
        assert body == json.loads(raw)
        bodies.append(body)
        body["script"].append("rm -rf /")
        body["nested"]["list"][1]["a"].append(3)
        body["commandId"] = "Changed"


def test_a_large_body_that_is_not_json_is_still_answered_as_text():
    raw = b"{" + b"x" * transport._PARSE_ONCE_FROM
    assert transport._json_body(raw) == raw.decode()
    assert transport._json_body(raw) == raw.decode()


def test_a_body_forgotten_between_look_up_and_read_is_parsed_again(monkeypatch):
    """The cache is the module's, shared by every FakeAzure of the process (each answers under its own lock only):
    another fake's 17th large body clears it at any moment. A look-up that found the body, then read it after that
    clear, raised KeyError in the middle of answering a request; one read (dict.get) cannot."""
    raw = json.dumps({"commandId": "RunShellScript", "script": ["echo x" * 20] * 50}).encode()

    class ClearedAfterLookUp(dict):
        def __contains__(self, key):  # what a clear by another thread between `in` and `[]` does
            found = super().__contains__(key)
            self.clear()
            return found

    cache = ClearedAfterLookUp()
    monkeypatch.setattr(transport, "_PARSED", cache)
    assert transport._json_body(raw) == json.loads(raw)
    cache[raw] = json.loads(raw)
    assert transport._json_body(raw) == json.loads(raw)


def test_the_request_log_keeps_what_was_sent_whatever_a_route_does_with_the_body(azure, clients, network):
    """A route gets a body of its own, not the log's: the subnet PUT's route set provisioningState in the parsed
    body it keeps as the stored subnet, and azure.requests then showed a field the client never sent (and would
    show every later change made to the stored subnet)."""
    vnet = network["vnet"].rsplit("/", 1)[-1]
    sent = {"properties": {"addressPrefix": "10.0.1.0/24"}}
    clients.network.subnets.begin_create_or_update(RG, vnet, "other", sent).result()
    (put,) = [r for r in azure.requests if r.method == "PUT" and r.path.endswith("/subnets/other")]
    assert put.body == sent
    assert clients.network.subnets.get(RG, vnet, "other").provisioning_state == "Succeeded"
