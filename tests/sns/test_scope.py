"""The dispatch's first look (simplequeue.api.aws): the service a request's signature is scoped to,
read from an Authorization header or a presigned URL, before the signature is checked."""

from __future__ import annotations

from simplequeue.api.sqs.sigv4 import scope_service

HEADER = (
    "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20240101/us-east-1/{service}/aws4_request, "
    "SignedHeaders=host;x-amz-date, Signature=" + "0" * 64
)


def test_the_scope_of_an_authorization_header() -> None:
    assert scope_service({"authorization": HEADER.format(service="sns")}, "") == "sns"
    assert scope_service({"authorization": HEADER.format(service="sqs")}, "Action=Publish") == "sqs"
    assert scope_service({"authorization": "Bearer abc"}, "") is None


def test_the_scope_of_a_presigned_url() -> None:
    query = "Action=ListTopics&X-Amz-Credential=AKIDEXAMPLE%2F20240101%2Fus-east-1%2Fsns%2Faws4_request"
    assert scope_service({}, query) == "sns"
    assert scope_service({}, "X-Amz-Credential=garbage") is None


def test_no_signature_has_no_scope() -> None:
    assert scope_service({}, "Action=ListTopics") is None
    assert scope_service({"content-type": "application/x-www-form-urlencoded"}, "") is None
