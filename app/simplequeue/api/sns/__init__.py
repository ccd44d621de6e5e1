"""The Amazon SNS door: SNS's query protocol on the service's own port, beside the SQS door.

`POST /` (or a GET naming an Action) whose SigV4 signature is scoped to the service `sns`, or an
unsigned one naming one of SNS's actions (simplequeue.api.aws tells the doors apart). A form in
(`Action=Publish&TopicArn=...`, lists as `.member.N`, maps as `.entry.N`), XML out in SNS's
namespace. Unchanged boto3 `sns` clients and `aws sns` use simplequeue's topics by changing only
their endpoint URL.

- protocol.py: the form decoded into nested parameters, answers written as SNS's XML;
- errors.py: SNS's error codes and their wire shape, and the service's errors in SNS's words;
- context.py: what every action is called with (the topic service, the caller, the base URL) and
  reading the ARNs and parameters actions take;
- topics.py, subscriptions.py, publish.py, tags.py: the actions, each a call of TopicService;
- routes.py: the dispatch.

Nothing here keeps state: this package translates SNS's wire to and from TopicService.
"""
