"""What one process keeps of its own for the SQS door, beside the database it shares with every
replica: SQS's message move tasks and the asyncio tasks that run them (moves.py), FIFO receive
attempts (attempts.py), and PurgeQueue's one purge per 60 seconds (purges.py).

Each is an object that create_app's lifespan builds (and, for the move tasks, stops): no module
holds state. Replicas share none of it and a restart forgets it, which docs/sqs.md says where it
shows. The SQS door (simplequeue.api.sqs) only translates SQS's wire to and from these objects.

Nothing is imported here: simplequeue.service.queues, below these modules, must not load them."""
