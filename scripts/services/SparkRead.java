// A local Spark 4.0.1 session (Delta Lake 4.0.0, Iceberg 1.10.0) that answers queries read from stdin,
// one per line, with one JSON line each on stdout:
//   {"columns":["a","b"],"rows":[[1,"x"],...],"ms":12}     or     {"error":"...","ms":3}
// The session keeps going after an error. Besides Spark SQL (e.g. SELECT * FROM delta.`/t` VERSION AS OF 3)
// a line may be
//   ICEBERG <metadata.json path> [snapshot id]            every row of an Iceberg table read by its metadata file
//   ICEBERG_VIEW <name> <metadata.json path> [snapshot id] registers that table as a temporary view <name>
//                                                          (then query it in SQL); answers no columns, no rows
// Paths may not contain spaces. Empty lines are skipped. -Dspark.read.warehouse=DIR keeps created tables. Start-up time goes to stderr as {"ready_ms":N};
// Spark's own logging goes to stderr (level WARN).
//
// Run (Java 17 source-file mode), jars from scripts/services/resolve_spark.sh:
//   java $(scripts/services/resolve_spark.sh --java-opts) -cp "$(scripts/services/resolve_spark.sh)/*" \
//        scripts/services/SparkRead.java
//
// Values: numbers as JSON numbers (decimals exact, NaN/Infinity as strings), strings, booleans, null;
// dates as "YYYY-MM-DD", timestamp as an ISO instant ("2024-01-02T03:04:05.123456Z"), timestamp_ntz as
// "2024-01-02T03:04:05.123456", binary as lowercase hex, structs as Spark's JSON of
// the struct, arrays and maps as a string of Scala's text of them.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.List;

import org.apache.spark.sql.DataFrameReader;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.StructField;

public class SparkRead {
    public static void main(String[] args) throws Exception {
        long start = System.nanoTime();
        // Logging at WARN to stderr from the first line (Spark's default profile logs INFO until setLogLevel).
        if (System.getProperty("log4j2.configurationFile") == null) {
            java.nio.file.Path log4j = Files.createTempFile("spark-read-log4j2", ".properties");
            log4j.toFile().deleteOnExit();
            Files.writeString(log4j, String.join("\n",
                    "rootLogger.level = warn",
                    "rootLogger.appenderRef.stderr.ref = console",
                    "appender.console.type = Console",
                    "appender.console.name = console",
                    "appender.console.target = SYSTEM_ERR",
                    "appender.console.layout.type = PatternLayout",
                    "appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n%ex",
                    "logger.hadoop.name = org.apache.hadoop.util.NativeCodeLoader",
                    "logger.hadoop.level = error", ""));
            System.setProperty("log4j2.configurationFile", log4j.toString());
        }
        PrintStream out = new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), false, StandardCharsets.UTF_8);
        // Anything else that writes to System.out (a library's println) must not break the JSON lines.
        System.setOut(System.err);
        // Where CREATE TABLE puts tables (spark_catalog and the Iceberg catalog `iceberg`): -Dspark.read.warehouse,
        // else a scratch folder removed at exit.
        String warehouse = System.getProperty("spark.read.warehouse");
        if (warehouse == null) {
            java.nio.file.Path scratch = Files.createTempDirectory("spark-read-warehouse");
            warehouse = scratch.toString();
            Runtime.getRuntime().addShutdownHook(new Thread(() -> {
                try (var paths = Files.walk(scratch)) {
                    paths.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
                } catch (Exception ignored) {
                }
            }));
        }
        SparkSession spark = SparkSession.builder()
                .appName("retina-spark-read")
                .master(System.getProperty("spark.master", "local[2]"))
                .config("spark.driver.host", "127.0.0.1")
                .config("spark.driver.bindAddress", "127.0.0.1")
                .config("spark.ui.enabled", "false")
                .config("spark.sql.shuffle.partitions", "2")
                .config("spark.default.parallelism", "2")
                .config("spark.databricks.delta.snapshotPartitions", "2")
                .config("spark.sql.session.timeZone", "UTC")
                .config("spark.sql.debug.maxToStringFields", "1000")
                .config("spark.sql.datetime.java8API.enabled", "true")
                .config("spark.sql.warehouse.dir", warehouse + "/spark")
                .config("spark.sql.extensions",
                        "io.delta.sql.DeltaSparkSessionExtension,"
                                + "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions")
                .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
                // An Iceberg catalog on a scratch folder, for tests that create Iceberg tables themselves.
                .config("spark.sql.catalog.iceberg", "org.apache.iceberg.spark.SparkCatalog")
                .config("spark.sql.catalog.iceberg.type", "hadoop")
                .config("spark.sql.catalog.iceberg.warehouse", warehouse + "/iceberg")
                // The catalog Iceberg's data source loads paths through (spark.read.format("iceberg").load(path)):
                // its default is a Hive catalog, whose jars are not here. A Hadoop catalog loads a path ending in
                // metadata.json as that static version of the table.
                .config("spark.sql.catalog.default_iceberg", "org.apache.iceberg.spark.SparkCatalog")
                .config("spark.sql.catalog.default_iceberg.type", "hadoop")
                .config("spark.sql.catalog.default_iceberg.warehouse", warehouse + "/iceberg")
                .getOrCreate();
        spark.sparkContext().setLogLevel("WARN");
        System.err.println("{\"ready_ms\":" + (System.nanoTime() - start) / 1_000_000 + "}");
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String query = line.trim();
            if (query.isEmpty()) continue;
            long t0 = System.nanoTime();
            String answer;
            try {
                answer = answer(spark, query);
            } catch (Throwable e) {
                answer = "{\"error\":" + quote(describe(e));
            }
            out.println(answer + ",\"ms\":" + (System.nanoTime() - t0) / 1_000_000 + "}");
            out.flush();
        }
        spark.stop();
        System.exit(0);
    }

    /** The JSON of one answer, less its closing brace. */
    static String answer(SparkSession spark, String query) {
        String[] words = query.split("\\s+");
        String head = words[0].toUpperCase();
        if (head.equals("ICEBERG_VIEW")) {
            if (words.length < 3 || words.length > 4) throw new IllegalArgumentException("ICEBERG_VIEW <name> <metadata path> [snapshot id]");
            iceberg(spark, words[2], words.length == 4 ? words[3] : null).createOrReplaceTempView(words[1]);
            return "{\"columns\":[],\"rows\":[]";
        }
        Dataset<Row> frame;
        if (head.equals("ICEBERG")) {
            if (words.length < 2 || words.length > 3) throw new IllegalArgumentException("ICEBERG <metadata path> [snapshot id]");
            frame = iceberg(spark, words[1], words.length == 3 ? words[2] : null);
        } else {
            frame = spark.sql(query);
        }
        StructField[] fields = frame.schema().fields();
        List<Row> rows = frame.collectAsList();
        StringBuilder json = new StringBuilder("{\"columns\":[");
        for (int i = 0; i < fields.length; i++) {
            if (i > 0) json.append(',');
            json.append(quote(fields[i].name()));
        }
        json.append("],\"rows\":[");
        for (int r = 0; r < rows.size(); r++) {
            if (r > 0) json.append(',');
            Row row = rows.get(r);
            json.append('[');
            for (int i = 0; i < fields.length; i++) {
                if (i > 0) json.append(',');
                value(json, row, i);
            }
            json.append(']');
        }
        return json.append(']').toString();
    }

    /** An Iceberg table by its metadata file (Iceberg's HadoopTables loads a `*metadata.json` path statically). */
    static Dataset<Row> iceberg(SparkSession spark, String metadata, String snapshot) {
        DataFrameReader reader = spark.read().format("iceberg");
        if (snapshot != null) reader = reader.option("snapshot-id", snapshot);
        return reader.load(metadata);
    }

    static void value(StringBuilder json, Row row, int i) {
        if (row.isNullAt(i)) {
            json.append("null");
            return;
        }
        Object v = row.get(i);
        if (v instanceof BigDecimal d) {
            json.append(d.toPlainString());
        } else if (v instanceof Double d) {
            json.append(d.isNaN() || d.isInfinite() ? quote(d.toString()) : d.toString());
        } else if (v instanceof Float f) {
            json.append(f.isNaN() || f.isInfinite() ? quote(f.toString()) : f.toString());
        } else if (v instanceof Number || v instanceof Boolean) {
            json.append(v);
        } else if (v instanceof byte[] bytes) {
            StringBuilder hex = new StringBuilder();
            for (byte b : bytes) hex.append(String.format("%02x", b));
            json.append(quote(hex.toString()));
        } else if (v instanceof Row nested) {
            json.append(nested.json());
        } else if (v instanceof scala.collection.Iterable<?> || v instanceof java.util.Map<?, ?>) {
            json.append(quote(String.valueOf(v))); // arrays and maps: Scala's text of them
        } else {
            json.append(quote(v.toString())); // String, LocalDate, Instant, LocalDateTime, ...
        }
    }

    static String describe(Throwable e) {
        String message = e.getMessage() == null ? e.toString() : e.getClass().getSimpleName() + ": " + e.getMessage();
        return message;
    }

    static String quote(String s) {
        StringBuilder q = new StringBuilder(s.length() + 2).append('"');
        for (char c : s.toCharArray()) {
            switch (c) {
                case '"' -> q.append("\\\"");
                case '\\' -> q.append("\\\\");
                case '\n' -> q.append("\\n");
                case '\r' -> q.append("\\r");
                case '\t' -> q.append("\\t");
                default -> {
                    if (c < 0x20) q.append(String.format("\\u%04x", (int) c));
                    else q.append(c);
                }
            }
        }
        return q.append('"').toString();
    }
}
