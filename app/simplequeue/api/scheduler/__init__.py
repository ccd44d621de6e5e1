"""Amazon EventBridge Scheduler's API (CreateSchedule, GetSchedule, UpdateSchedule, DeleteSchedule,
ListSchedules) over our schedules, so that boto3's `scheduler` client works unchanged: a request to
`/schedules` or `/schedules/{Name}` whose SigV4 credential scope names `scheduler` is this door's
(simplequeue.api.scheduler.routes); every other request there is the REST API's. Outside the
OpenAPI spec: AWS's service model describes it."""
