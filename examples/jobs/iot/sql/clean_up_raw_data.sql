-- Delete the raw events that have been processed into the mart.
DELETE FROM staging.raw_events
WHERE event_date = '2025-01-15' AND status = 'processed';
