"""The fake parses a large body sent again and again (the node check's 48 KB script in every node's Run Command)
once, yet each request still gets a body of its own: a route or a test that changes one request's body (or its
entry in the request log) never changes another's."""

from __future__ import annotations

import json

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
