"""The Amazon SQS door: SQS's wire protocols on the service's own port (issue 24).

`POST /` dispatched by `X-Amz-Target: AmazonSQS.<Action>` (AWS JSON 1.0, what current SDKs send) or
by the form's `Action` (the query protocol, with XML answers), and `POST /{account_id}/{queue}` (the
query protocol posting to a queue URL). Unchanged boto3, aws-cli and the AWS SDKs use a simplequeue
queue by changing only their endpoint URL.

- protocol.py: requests decoded into one shape (JSON's), answers encoded in the caller's protocol;
- errors.py: SQS's error codes and their exact wire shapes;
- urls.py: queue URLs and ARNs;
- params.py: reading and checking an action's parameters;
- context.py, addressing.py: what every action is called with; which queue a call names;
- queues.py, sends.py, receives.py, handles.py, moves.py, permissions.py, tags.py: the actions
  (handles.py: receipt handles, and the deletes and visibility changes that take them), each a call of
  QueueService or of this process's own state for the door (simplequeue.service.local: message
  move tasks, receive attempts, purges), which the app's lifespan builds;
- routes.py: the routes (outside the OpenAPI spec) and the dispatch; simplequeue.api.aws hands it
  every request of the port's `POST /` that is not the SNS door's (simplequeue.api.sns).

Nothing here keeps state: this package translates SQS's wire to and from the service.
"""
