"""The AWS SDK for JavaScript v3 (@aws-sdk/client-sqs), unchanged, against the SQS door on every engine.

clients/sqs-js/send_receive.mjs (its package-lock.json pins the SDK; `npm ci` installs it once per run)
creates a queue, sends one message with message attributes (String, Number, Binary) and a batch of
two without, receives them (with their attributes) and deletes them, and reads the name of one
error. The SDK checks MD5OfMessageBody of every send and MD5OfBody of every message received (its
`md5` option is left on), so a body digest the door got wrong would fail the script. The pinned SDK
(3.1175.0) does not check MD5OfMessageAttributes: the script computes it in JavaScript, and these
tests compare the door's with that and with moto's (an implementation that is not ours). Without
node and npm the tests are skipped, except under CI.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from uuid import uuid4

import pytest

from tests.installs import npm_ci

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).parent.parent.parent
# What moto 5.2.5's Message.attribute_md5 answers for the script's attributes.
ATTRIBUTES_MD5 = "f4a2a9875439e79a5d156d3a8f2eda7f"
ATTRIBUTES = {
    "trace": {"DataType": "String", "StringValue": "héllo ✓"},
    "price": {"DataType": "Number.float", "StringValue": "2.50"},
    "thumb": {"DataType": "Binary", "BinaryValue": "00ff3c"},
}
CLIENT = ROOT / "clients" / "sqs-js"


def run(*command: str, timeout: float = 300) -> str:
    done = subprocess.run(command, cwd=CLIENT, capture_output=True, text=True, timeout=timeout, check=False)
    assert done.returncode == 0, f"{' '.join(command)} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def node() -> str:
    """node, with clients/sqs-js/node_modules installed by `npm ci` once per package-lock.json."""
    if shutil.which("npm") is None or shutil.which("node") is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("CI needs node and npm for the JavaScript SDK check")
        pytest.skip("node and npm are not installed")
    npm_ci(CLIENT)
    return "node"


def test_the_javascript_sdk_sends_receives_deletes_and_names_an_error(node: str, sqs_base: str) -> None:
    out = json.loads(run(node, "send_receive.mjs", sqs_base, f"js-{uuid4().hex[:12]}", timeout=60))
    assert out["failed"] == []
    assert len(out["sent"]) == 3
    bodies = ["héllo ✓ 🎉", '{"n": 1}', "two"]
    received = {m["id"]: m for m in out["received"]}
    assert sorted(received) == sorted(out["sent"])
    assert sorted(m["body"] for m in received.values()) == sorted(bodies)
    for message in received.values():
        assert message["md5"] == hashlib.md5(message["body"].encode()).hexdigest()
        assert message["receives"] == "1"
    assert out["sentAttributesMd5"] == [ATTRIBUTES_MD5, ATTRIBUTES_MD5]
    with_attributes = received[out["sent"][0]]
    assert with_attributes["attributes"] == ATTRIBUTES
    assert with_attributes["attributesMd5"] == [ATTRIBUTES_MD5, ATTRIBUTES_MD5]
    for message in received.values():
        if message is not with_attributes:
            assert (message["attributes"], message["attributesMd5"]) == ({}, [None, None])
    assert out["deleted"] == 3
    assert out["left"] == "0"
    assert out["md5Checked"] is True
    assert out["error"] == {"name": "QueueDoesNotExist", "status": 400, "typed": True}


def test_the_docs_show_the_script_that_runs() -> None:
    """docs/sqs.md's JavaScript blocks are verbatim excerpts of the script these tests run."""
    page = (ROOT / "docs" / "sqs.md").read_text(encoding="utf-8")
    section = page.split("\n## JavaScript\n", 1)[1].split("\n## ", 1)[0]
    excerpts = re.findall(r"^```js\n(.*?)^```$", section, re.M | re.S)
    assert excerpts
    script = (CLIENT / "send_receive.mjs").read_text(encoding="utf-8")
    for excerpt in excerpts:
        assert excerpt in script, excerpt
