-- simplequeue schema v19 for SQL Server: what a schedule made through Amazon EventBridge Scheduler's
-- API (simplequeue.api.scheduler) keeps beside its timing, to answer GetSchedule as it was given.
-- description: its Description. aws: JSON text of its ScheduleExpression,
-- ScheduleExpressionTimezone, Target and FlexibleTimeWindow as given; NULL for a schedule made (or
-- last replaced) through the REST API, whose EventBridge form is derived from its timing. Every
-- batch is guarded: running the file again is harmless.
IF COL_LENGTH(N'dbo.sq_schedules', N'description') IS NULL
ALTER TABLE dbo.sq_schedules ADD description NVARCHAR(512) NULL;
GO

IF COL_LENGTH(N'dbo.sq_schedules', N'aws') IS NULL
ALTER TABLE dbo.sq_schedules ADD aws NVARCHAR(MAX) NULL;
GO
