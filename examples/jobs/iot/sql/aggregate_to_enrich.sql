-- Combine both verified streams into the data mart, then mark them processed.
MERGE INTO mart.enriched_events AS t
USING (
  SELECT r.site_id, r.event_date, avg(r.pm25) AS pm25, avg(r.temperature) AS temperature, g.geom
  FROM staging.raw_events r
  JOIN ref.sites g ON g.site_id = r.site_id
  WHERE r.event_date = DATE '2025-01-15' AND r.status = 'verified'
  GROUP BY r.site_id, r.event_date, g.geom
) AS s
ON t.event_date = DATE '2025-01-15' AND t.site_id = s.site_id
WHEN MATCHED THEN UPDATE SET t.pm25 = s.pm25, t.temperature = s.temperature
WHEN NOT MATCHED THEN INSERT (site_id, event_date, pm25, temperature, geom)
  VALUES (s.site_id, s.event_date, s.pm25, s.temperature, s.geom);

UPDATE staging.raw_events
SET status = 'processed'
WHERE event_date = '2025-01-15' AND status = 'verified';
