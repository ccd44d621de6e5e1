-- simplequeue schema v20 for PostgreSQL: what a schedule made through Amazon EventBridge Scheduler's
-- API (simplequeue.api.scheduler) keeps beside its timing, to answer GetSchedule as it was given.
-- description: its Description. aws: JSON text of its ScheduleExpression,
-- ScheduleExpressionTimezone, Target and FlexibleTimeWindow as given; NULL for a schedule made (or
-- last replaced) through the REST API, whose EventBridge form is derived from its timing.
ALTER TABLE sq_schedules ADD COLUMN IF NOT EXISTS description text CHECK (length(description) <= 512);
ALTER TABLE sq_schedules ADD COLUMN IF NOT EXISTS aws text;
