package pulsarlab.driver;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Instant;
import java.util.HashMap;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CompletionException;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.zip.CRC32;
import org.apache.pulsar.client.api.CompressionType;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.MessageIdAdv;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.ProducerBuilder;
import org.apache.pulsar.client.api.ClientBuilder;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.PulsarClientException;
import org.apache.pulsar.client.api.Reader;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;
import org.apache.pulsar.client.api.ServiceUrlProvider;
import org.apache.pulsar.client.api.SubscriptionType;
import org.apache.pulsar.client.api.TypedMessageBuilder;
import org.apache.pulsar.client.impl.AutoClusterFailover;

/**
 * pulsarlab's workload driver: one producer, one consumer or one storage reader per process, recording
 * every client event into a binary journal that the Python side turns into the Parquet history.
 *
 * <p>Usage: {@code java -cp <classes>:<pulsar lib>/* pulsarlab.driver.Driver CONFIG.json}. The parent
 * talks to it by lines: on stdin {@code start <deadline epoch ms>} (producers begin), {@code end}
 * (producers stop sending before the deadline), {@code drain} (producing is over: consumers stop
 * once idle) and {@code stop}; on stdout {@code @ready},
 * {@code @counts ...} every 100 ms, {@code @error <text>}, {@code @finished} (a producer's last outcome
 * arrived) and {@code @exit}. End of stdin means the parent is gone: stop.
 *
 * <p>The journal layout is described in {@code pulsarlab/history/journal.py}, which reads it.
 */
public final class Driver {
    static final byte INVOKE = 1, OK = 2, FAIL = 3, INFO = 4, RECEIVE = 5, ACK = 6, NACK = 7, READ = 8, ACK_FAIL = 9,
            SUBSCRIBE = 10, SCAN = 11;
    static final int HAS_SEQ = 1, HAS_ID = 2, HAS_PUBLISH_TS = 4, HAS_CRC = 8, HAS_READ_INDEX = 16, HAS_REDELIVERY = 32;
    static final int KEY_CYCLE = 1 << 12;
    static final long CLIENT_CLOSE_MS = 300;

    // counters reported to the parent: invoked, acked, failed, unknown, received, stored
    final AtomicLong[] counts = new AtomicLong[6];
    final JsonNode cfg;
    final PrintStream out = System.out;
    volatile long deadlineEpochMs = -1;
    volatile boolean draining, stopping, ending;
    final long epochNs0, nano0;

    Driver(JsonNode cfg) {
        this.cfg = cfg;
        for (int i = 0; i < counts.length; i++) {
            counts[i] = new AtomicLong();
        }
        Instant now = Instant.now();
        nano0 = System.nanoTime();
        epochNs0 = now.getEpochSecond() * 1_000_000_000L + now.getNano();
    }

    /** Wall-clock nanoseconds since the epoch, read from the monotonic clock (cheap, never goes back). */
    long now() {
        return epochNs0 + (System.nanoTime() - nano0);
    }

    public static void main(String[] args) throws Exception {
        JsonNode cfg = new ObjectMapper().readTree(new File(args[0]));
        Driver d = new Driver(cfg);
        int code = 0;
        try {
            d.run();
        } catch (Throwable t) {
            d.say("@error " + cfg.path("name").asText() + ": " + oneLine(t));
            code = 1;
        }
        d.say("@exit");
        System.out.flush();
        Runtime.getRuntime().halt(code); // client threads must not keep the JVM alive
    }

    static String oneLine(Throwable t) {
        Throwable c = unwrap(t);
        String msg = c.getMessage() == null ? "" : c.getMessage().replace('\n', ' ');
        return c.getClass().getSimpleName() + ": " + msg;
    }

    static Throwable unwrap(Throwable t) {
        while (t instanceof CompletionException && t.getCause() != null) {
            t = t.getCause();
        }
        return t;
    }

    synchronized void say(String line) {
        out.println(line);
        out.flush();
    }

    void run() throws Exception {
        Thread control = new Thread(this::control, "control");
        control.setDaemon(true);
        control.start();
        Thread reporter = new Thread(this::report, "counts");
        reporter.setDaemon(true);
        reporter.start();
        String mode = cfg.path("mode").asText();
        ServiceUrlProvider failover = failoverProvider(cfg.path("failover"));
        ClientBuilder builder = (failover != null
                ? PulsarClient.builder().serviceUrlProvider(failover)
                : PulsarClient.builder().serviceUrl(cfg.path("service_url").asText()))
                .operationTimeout(30, TimeUnit.SECONDS)
                .connectionTimeout(5, TimeUnit.SECONDS)
                .startingBackoffInterval(100, TimeUnit.MILLISECONDS)
                .maxBackoffInterval(cfg.path("max_backoff_ms").asLong(5000), TimeUnit.MILLISECONDS);
        // a secure cluster: the token is read from its file by the client (never passed on a command line)
        if (cfg.hasNonNull("token_file")) {
            builder.authentication("org.apache.pulsar.client.impl.auth.AuthenticationToken",
                    "file://" + cfg.path("token_file").asText());
        }
        if (cfg.hasNonNull("tls_trust_certs_file")) {
            builder.tlsTrustCertsFilePath(cfg.path("tls_trust_certs_file").asText())
                    .allowTlsInsecureConnection(false)
                    .enableTlsHostnameVerification(true);
        }
        PulsarClient client = builder.build();
        if (failover != null) {
            Thread watcher = new Thread(() -> watchServiceUrl(failover), "service-url");
            watcher.setDaemon(true);
            watcher.start();
        }
        try (Journal journal = new Journal(Path.of(cfg.path("journal").asText()))) {
            // Ctrl-C or SIGTERM: what was recorded so far reaches the disk before the JVM exits
            Runtime.getRuntime().addShutdownHook(new Thread(() -> {
                try {
                    journal.close();
                } catch (IOException ignored) {
                    // nothing more can be saved
                }
            }, "journal-close"));
            switch (mode) {
                case "produce" -> produce(client, journal);
                case "consume" -> consume(client, journal);
                case "read" -> read(client, journal);
                default -> throw new IllegalArgumentException("unknown mode " + mode);
            }
        } finally {
            // its producer, consumer or reader is closed by now; what closing the client adds is the
            // graceful end of its thread pools (seconds of quiet period), which nothing here needs
            // (the JVM halts next): wait for it briefly, never for long
            try {
                client.closeAsync().get(CLIENT_CLOSE_MS, TimeUnit.MILLISECONDS);
            } catch (Exception ignored) {
                // still closing: the halt ends it
            }
            sayCounts();
        }
    }

    void control() {
        try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
            String line;
            while ((line = in.readLine()) != null) {
                if (line.startsWith("start ")) {
                    deadlineEpochMs = Long.parseLong(line.substring(6).trim());
                } else if (line.equals("end")) {
                    ending = true; // producers: the send phase ends now, in-flight sends still complete
                } else if (line.equals("drain")) {
                    draining = true;
                } else if (line.equals("stop")) {
                    stopping = true;
                }
            }
        } catch (IOException ignored) {
            // the parent is gone
        }
        stopping = true;
        draining = true;
    }

    /**
     * The Java client's own cluster failover (PIP-121) when the config asks for it: the primary
     * cluster first, the secondaries in order once the primary has not answered for the failover
     * delay, back to the primary once it has answered for the switch-back delay.
     */
    static ServiceUrlProvider failoverProvider(JsonNode f) {
        if (f == null || f.isMissingNode() || f.isNull()) {
            return null;
        }
        java.util.List<String> secondary = new java.util.ArrayList<>();
        f.path("secondary").forEach(u -> secondary.add(u.asText()));
        return AutoClusterFailover.builder()
                .primary(f.path("primary").asText())
                .secondary(secondary)
                .failoverDelay(f.path("failover_delay_ms").asLong(), TimeUnit.MILLISECONDS)
                .switchBackDelay(f.path("switch_back_delay_ms").asLong(), TimeUnit.MILLISECONDS)
                .checkInterval(f.path("check_interval_ms").asLong(), TimeUnit.MILLISECONDS)
                .build();
    }

    /** Tell the parent each time the client switched clusters: "@switch EPOCH_NS URL". */
    void watchServiceUrl(ServiceUrlProvider provider) {
        String last = provider.getServiceUrl();
        while (true) {
            try {
                Thread.sleep(20);
            } catch (InterruptedException e) {
                return;
            }
            String current = provider.getServiceUrl();
            if (current != null && !current.equals(last)) {
                say("@switch " + now() + " " + current);
                last = current;
            }
        }
    }

    void report() {
        while (true) {
            try {
                Thread.sleep(100);
            } catch (InterruptedException e) {
                return;
            }
            sayCounts();
        }
    }

    void sayCounts() {
        StringBuilder b = new StringBuilder("@counts");
        for (AtomicLong c : counts) {
            b.append(' ').append(c.get());
        }
        say(b.toString());
    }

    // ----- producer ----------------------------------------------------------------------------

    void produce(PulsarClient client, Journal journal) throws Exception {
        String name = cfg.path("name").asText();
        String producerName = cfg.path("producer_name").asText(); // the history's producer, the header's and Pulsar's
        int size = cfg.path("message_size").asInt(256);
        double rate = cfg.path("rate").asDouble(0);
        boolean batching = cfg.path("batching").asBoolean(true);
        int sendTimeoutMs = cfg.path("send_timeout_ms").asInt(30_000);
        ProducerBuilder<byte[]> pb = client.newProducer()
                .topic(cfg.path("topic").asText())
                .producerName(producerName)
                .enableBatching(batching)
                .blockIfQueueFull(true)
                .sendTimeout(sendTimeoutMs, TimeUnit.MILLISECONDS)
                .maxPendingMessages(cfg.path("max_pending").asInt(1000))
                .batchingMaxPublishDelay(5, TimeUnit.MILLISECONDS)
                .batchingMaxMessages(1000)
                .batchingMaxBytes(4 * 1024 * 1024)
                .compressionType(CompressionType.NONE);
        Random rng = new Random(cfg.path("seed").asLong(0));
        byte[] padding = new byte[size];
        rng.nextBytes(padding);
        int keyCount = Math.max(cfg.path("keys").asInt(100), 1);
        String[] keys = new String[KEY_CYCLE];
        int[] keyIds = new int[KEY_CYCLE];
        for (int i = 0; i < KEY_CYCLE; i++) {
            keys[i] = "k" + rng.nextInt(keyCount);
            keyIds[i] = journal.id(keys[i]);
        }
        byte[] prefix = (producerName + ":").getBytes(StandardCharsets.US_ASCII);
        AtomicLong acked = counts[1], failed = counts[2], unknown = counts[3];
        try (Producer<byte[]> producer = pb.create()) {
            say("@ready");
            while (deadlineEpochMs < 0 && !stopping) {
                Thread.sleep(1);
            }
            long deadline = nano0 + (deadlineEpochMs * 1_000_000L - epochNs0);
            long start = System.nanoTime();
            long seq = 0;
            int burst = rate > 0 ? 1 : 64; // messages between clock reads when unthrottled
            CRC32 crc = new CRC32();
            StringBuilder head = new StringBuilder(64);
            while (!stopping) {
                long t = System.nanoTime();
                if (t - deadline >= 0 || ending) {
                    break;
                }
                if (rate > 0) {
                    long ahead = start + (long) (seq * 1e9 / rate) - t;
                    if (ahead > 0) {
                        TimeUnit.NANOSECONDS.sleep(Math.min(ahead, 50_000_000L));
                        continue;
                    }
                }
                for (int i = 0; i < burst; i++) {
                    int k = (int) (seq % KEY_CYCLE);
                    long ts = now();
                    head.setLength(0);
                    head.append(seq).append(':').append(ts).append(':');
                    byte[] payload = payload(prefix, head, padding, size);
                    crc.reset();
                    crc.update(payload, 0, payload.length);
                    int h = (int) crc.getValue();
                    journal.send(INVOKE, seq, keyIds[k], h, ts, null, -1);
                    counts[0].set(seq + 1);
                    final long s = seq;
                    final int keyId = keyIds[k];
                    try {
                        TypedMessageBuilder<byte[]> mb = producer.newMessage().key(keys[k]).value(payload).sequenceId(seq);
                        mb.sendAsync().whenComplete((id, ex) -> {
                            if (ex == null) {
                                journal.send(OK, s, keyId, h, now(), id, -1);
                                acked.incrementAndGet();
                            } else {
                                Throwable c = unwrap(ex);
                                boolean definite = definiteFailure(c);
                                journal.send(definite ? FAIL : INFO, s, keyId, h, now(), null, journal.id(oneLine(c)));
                                (definite ? failed : unknown).incrementAndGet();
                            }
                        });
                    } catch (RuntimeException ex) { // refused before it left the client: certainly not written
                        journal.send(FAIL, s, keyId, h, now(), null, journal.id(oneLine(ex)));
                        failed.incrementAndGet();
                    }
                    seq++;
                }
            }
            try {
                producer.flush();
            } catch (PulsarClientException e) { // outcomes still arrive through the callbacks
                say("@error " + name + " flush: " + oneLine(e));
            }
            long waitUntil = System.nanoTime() + (sendTimeoutMs + 5_000L) * 1_000_000L;
            while (acked.get() + failed.get() + unknown.get() < seq && System.nanoTime() - waitUntil < 0) {
                Thread.sleep(5);
            }
            say("@finished");
        }
    }

    static byte[] payload(byte[] prefix, CharSequence head, byte[] padding, int size) {
        int n = prefix.length + head.length();
        byte[] p = new byte[Math.max(size, n)];
        System.arraycopy(prefix, 0, p, 0, prefix.length);
        for (int i = 0; i < head.length(); i++) {
            p[prefix.length + i] = (byte) head.charAt(i);
        }
        if (size > n) {
            System.arraycopy(padding, 0, p, n, size - n);
        }
        return p;
    }

    /**
     * Outcomes after which the message was certainly not written: the client refused it before it was
     * queued for the broker. Anything else is unknown. Errors a reconnecting producer fails its pending
     * messages with (quota exceeded, not authorized, closed, timed out) are unknown too: a message in
     * flight on the lost connection may have been stored.
     */
    static boolean definiteFailure(Throwable t) {
        return t instanceof PulsarClientException.ProducerQueueIsFullError
                || t instanceof PulsarClientException.InvalidMessageException
                || t instanceof PulsarClientException.InvalidTopicNameException
                || t instanceof PulsarClientException.MemoryBufferIsFullError;
    }

    // ----- consumer ----------------------------------------------------------------------------

    /**
     * Receive until idle once draining. Each ack asks the broker for a receipt and is recorded when it
     * completes (ok, or fail with the error); at most {@code max_pending_acks} are in flight, and the
     * outstanding ones are awaited (up to {@code ack_drain_ms}) before the consumer closes.
     */
    void consume(PulsarClient client, Journal journal) throws Exception {
        String name = cfg.path("name").asText();
        String topic = cfg.path("topic").asText();
        long drainNs = (long) (cfg.path("drain_seconds").asDouble(5.0) * 1e9);
        long reconnectNs = (long) (cfg.path("drain_reconnect_seconds").asDouble(60.0) * 1e9);
        int maxAcks = Math.max(cfg.path("max_pending_acks").asInt(1000), 1);
        Semaphore acks = new Semaphore(maxAcks);
        try (Consumer<byte[]> consumer = client.newConsumer()
                .topic(topic)
                .subscriptionName(cfg.path("subscription").asText())
                .subscriptionType(subscriptionType(cfg.path("subscription_type").asText()))
                .consumerName(name)
                .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest)
                .receiverQueueSize(1000)
                .isAckReceiptEnabled(true)
                .replicateSubscriptionState(cfg.path("replicate_subscription").asBoolean(false))
                .subscribe()) {
            journal.subscribe(now(), journal.id(topic));
            say("@ready");
            long idleSince = 0;
            long awayNs = 0; // while draining: how long the consumer has been without a broker
            long lastNs = System.nanoTime();
            while (!stopping) {
                Message<byte[]> msg = consumer.receive(200, TimeUnit.MILLISECONDS);
                if (msg == null) {
                    if (draining) {
                        long t = System.nanoTime();
                        // a consumer between brokers receives nothing because it is away, not because the
                        // topic is drained: that time does not count as idle, up to drain_reconnect_seconds
                        if (!consumer.isConnected() && awayNs < reconnectNs) {
                            awayNs += t - lastNs;
                            lastNs = t;
                            idleSince = 0;
                            if (awayNs >= reconnectNs) {
                                say("@error " + name + " drain: still not connected after "
                                        + reconnectNs / 1_000_000_000L + " s; the drain ends on idle from now");
                            }
                            continue;
                        }
                        lastNs = t;
                        idleSince = idleSince == 0 ? t : idleSince;
                        if (t - idleSince > drainNs) {
                            break;
                        }
                    }
                    continue;
                }
                lastNs = System.nanoTime();
                idleSince = 0;
                Delivery d = Delivery.of(msg, journal);
                journal.delivery(RECEIVE, now(), d, msg.getRedeliveryCount());
                counts[4].incrementAndGet();
                boolean permit;
                while (!(permit = acks.tryAcquire(200, TimeUnit.MILLISECONDS)) && !stopping) {
                    // every ack slot is taken: wait for a receipt
                }
                if (!permit) {
                    break; // stopping: this message stays unacknowledged, and no ack row says otherwise
                }
                try {
                    consumer.acknowledgeAsync(d.id).whenComplete((v, ex) -> {
                        ackDone(journal, d, ex);
                        acks.release();
                    });
                } catch (RuntimeException ex) {
                    ackDone(journal, d, ex);
                    acks.release();
                }
            }
            awaitReceipts(name, acks, maxAcks);
        }
    }

    /**
     * Wait for the receipts of the acks still in flight: until all came, no receipt came for
     * {@code ack_idle_ms} (an ack sent on a connection its broker closed never gets one, so waiting on
     * for it only delays the run), or {@code ack_drain_ms} passed.
     */
    void awaitReceipts(String name, Semaphore acks, int maxAcks) throws InterruptedException {
        long waitMs = cfg.path("ack_drain_ms").asLong(30_000);
        long idleMs = cfg.path("ack_idle_ms").asLong(5_000);
        long start = System.nanoTime();
        long changed = start;
        int seen = acks.availablePermits();
        while (seen < maxAcks) {
            long now = System.nanoTime();
            if (now - start > waitMs * 1_000_000L || now - changed > idleMs * 1_000_000L) {
                say("@error " + name + ": " + (maxAcks - seen) + " acknowledgement(s) unanswered after "
                        + (now - start) / 1_000_000L + " ms (none answered in the last " + (now - changed) / 1_000_000L
                        + " ms); no ack row for them");
                return;
            }
            Thread.sleep(50);
            int permits = acks.availablePermits();
            if (permits != seen) {
                seen = permits;
                changed = System.nanoTime();
            }
        }
    }

    void ackDone(Journal journal, Delivery d, Throwable ex) {
        if (ex == null) {
            journal.delivery(ACK, now(), d, -1);
        } else {
            journal.delivery(ACK_FAIL, now(), d, journal.id(oneLine(ex)));
        }
    }

    static SubscriptionType subscriptionType(String name) {
        return switch (name) {
            case "exclusive" -> SubscriptionType.Exclusive;
            case "failover" -> SubscriptionType.Failover;
            case "shared" -> SubscriptionType.Shared;
            case "key_shared" -> SubscriptionType.Key_Shared;
            default -> throw new IllegalArgumentException("unknown subscription type " + name);
        };
    }

    // ----- storage view ------------------------------------------------------------------------

    /**
     * Scan each partition from the earliest position to the end position the parent asked the admin API
     * for, then write one scan row for it. The scan is complete only when a message at or past the end
     * was read (or the partition was empty); otherwise the row's error says why it stopped. A stalled or
     * failed scan does not fail the process: it is recorded in the scan row (and reported as
     * {@code @error}), and the next partition is scanned.
     */
    void read(PulsarClient client, Journal journal) throws Exception {
        String cluster = cfg.path("cluster").asText();
        say("@ready");
        for (JsonNode p : cfg.path("partitions")) {
            String topic = p.path("topic").asText();
            String end = p.path("end").isTextual() ? p.path("end").asText() : null;
            String error = scan(client, journal, topic, end, p.path("end_error").asText("no end position"));
            if (error != null) {
                say("@error scan of " + topic + " on " + cluster + ": " + error);
            }
        }
    }

    /** One partition's scan; returns why it stopped before the end, or null when it got there. */
    String scan(PulsarClient client, Journal journal, String topic, String endText, String endError) {
        double idleSeconds = cfg.path("idle_timeout").asDouble(60.0);
        long idleNs = (long) (idleSeconds * 1e9);
        long[] end = endText == null ? null : parseId(endText);
        int topicId = journal.id(topic);
        long index = 0;
        MessageId last = null;
        String error = null;
        if (end == null || end[1] >= 0) { // entry -1: an empty partition is complete at once
            try (Reader<byte[]> reader = client.newReader().topic(topic).startMessageId(MessageId.earliest).create()) {
                long lastProgress = System.nanoTime();
                long lastAsked = 0;
                while (end == null ? reader.hasMessageAvailable() : last == null || !reached(last, end)) {
                    if (stopping) {
                        error = "stopped";
                        break;
                    }
                    if (System.nanoTime() - lastProgress > idleNs) {
                        error = "stalled after " + index + " messages (idle " + String.format("%.0f", idleSeconds) + " s)";
                        break;
                    }
                    Message<byte[]> msg = reader.readNext(1, TimeUnit.SECONDS);
                    if (msg == null) {
                        if (end != null && last != null && System.nanoTime() - lastAsked > 2_000_000_000L) {
                            lastAsked = System.nanoTime();
                            String dispatchable = dispatchableEnd(reader, last);
                            if (dispatchable != null) {
                                endText = dispatchable; // what the scan proves it reached, recorded as its end
                                break;
                            }
                        }
                        continue;
                    }
                    lastProgress = System.nanoTime();
                    journal.read(now(), Delivery.of(msg, journal), topicId, index);
                    last = msg.getMessageId();
                    index++;
                    counts[5].incrementAndGet();
                }
            } catch (Exception e) {
                error = oneLine(e);
            }
        }
        if (end == null) {
            error = "end position unknown: " + endError; // whatever was read, completeness cannot be claimed
        }
        journal.scan(now(), topicId, index, last, journal.id(endText), journal.id(error));
        return error;
    }

    /**
     * When the entries between the last message read and the pinned end are markers (replicated
     * subscription snapshots, written after the last data message), no reader ever receives them. The
     * broker's last <em>dispatchable</em> message id, asked now (after the end was pinned), then is at
     * or before the last message read: everything a consumer could get has been read. Returns that id
     * as the scan's proven end, or null while there is more to read.
     */
    static String dispatchableEnd(Reader<byte[]> reader, MessageId last) throws PulsarClientException {
        java.util.List<org.apache.pulsar.client.api.TopicMessageId> ids = reader.getLastMessageIds();
        if (ids.size() != 1) {
            return null;
        }
        long[] d = idFields(ids.get(0));
        if (d[1] < 0 || !reached(last, d)) {
            return null;
        }
        return "(" + d[0] + "," + d[1] + "," + d[2] + "," + d[3] + ")";
    }

    /** {@code (ledger,entry,partition,batch)} as the admin side writes it. */
    static long[] parseId(String text) {
        String[] p = text.replace("(", "").replace(")", "").split(",");
        long[] v = new long[4];
        for (int i = 0; i < 4; i++) {
            v[i] = i < p.length ? Long.parseLong(p[i].trim()) : -1;
        }
        return v;
    }

    /** Whether a message read is at or past the end position: ledger, then entry, then (both batched) batch index. */
    static boolean reached(MessageId id, long[] end) {
        long[] m = idFields(id);
        if (m[0] != end[0]) {
            return m[0] > end[0];
        }
        if (m[1] != end[1]) {
            return m[1] > end[1];
        }
        return end[3] < 0 || m[3] < 0 || m[3] >= end[3];
    }

    /** ledger, entry, partition, batch index of a message id (-1 where it has none). */
    static long[] idFields(MessageId id) {
        if (id instanceof MessageIdAdv adv) {
            return new long[] {adv.getLedgerId(), adv.getEntryId(), adv.getPartitionIndex(), adv.getBatchIndex()};
        }
        String[] p = id.toString().split(":");
        return new long[] {Long.parseLong(p[0]), Long.parseLong(p[1]), p.length > 2 ? Long.parseLong(p[2]) : -1,
                p.length > 3 ? Long.parseLong(p[3]) : -1};
    }

    /** What a delivered or read message says about itself: the header its producer wrote, its id, key and topic. */
    record Delivery(int producer, long seq, long publishTs, int key, int crc, MessageId id, int topic) {
        static Delivery of(Message<byte[]> msg, Journal journal) {
            byte[] data = msg.getData();
            CRC32 crc = new CRC32();
            crc.update(data, 0, data.length);
            int producer = -1;
            long seq = -1, pts = -1;
            int a = indexOf(data, 0), b = a < 0 ? -1 : indexOf(data, a + 1), c = b < 0 ? -1 : indexOf(data, b + 1);
            if (c > 0) {
                long s = parse(data, a + 1, b), p = parse(data, b + 1, c);
                if (s >= 0 && p >= 0) {
                    producer = journal.id(new String(data, 0, a, StandardCharsets.UTF_8));
                    seq = s;
                    pts = p;
                }
            }
            String key = msg.hasKey() ? msg.getKey() : null;
            return new Delivery(producer, seq, pts, journal.id(key), (int) crc.getValue(), msg.getMessageId(),
                    journal.id(msg.getTopicName()));
        }

        static int indexOf(byte[] data, int from) {
            for (int i = from; i < Math.min(data.length, from + 64); i++) {
                if (data[i] == ':') {
                    return i;
                }
            }
            return -1;
        }

        static long parse(byte[] data, int from, int to) {
            if (from >= to || to - from > 19) {
                return -1;
            }
            long v = 0;
            for (int i = from; i < to; i++) {
                int digit = data[i] - '0';
                if (digit < 0 || digit > 9) {
                    return -1;
                }
                v = v * 10 + digit;
            }
            return v;
        }
    }

    // ----- journal -----------------------------------------------------------------------------

    /**
     * Fixed 80-byte little-endian records in {@code <base>.events}, the strings they refer to in
     * {@code <base>.strings} (each a 4-byte length and UTF-8 bytes; a string's id is its position).
     * Both are written out every half second or when the buffer fills, strings first, so a record on
     * disk never refers to a string that is not.
     */
    static final class Journal implements AutoCloseable {
        static final int RECORD = 80;
        static final int CAPACITY = 8192;
        final FileChannel events, strings;
        final ByteBuffer buf = ByteBuffer.allocateDirect(RECORD * CAPACITY).order(ByteOrder.LITTLE_ENDIAN);
        ByteBuffer sbuf = ByteBuffer.allocate(1 << 16).order(ByteOrder.LITTLE_ENDIAN);
        final Map<String, Integer> ids = new HashMap<>();
        final Thread flusher;
        boolean closed;

        Journal(Path base) throws IOException {
            events = FileChannel.open(Path.of(base + ".events"), StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE);
            strings = FileChannel.open(Path.of(base + ".strings"), StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE);
            flusher = new Thread(() -> {
                while (true) {
                    try {
                        Thread.sleep(500);
                        synchronized (this) {
                            if (closed) {
                                return;
                            }
                            flush();
                        }
                    } catch (InterruptedException | IOException e) {
                        return;
                    }
                }
            }, "journal");
            flusher.setDaemon(true);
            flusher.start();
        }

        /** The id of a string (-1 for null), adding it to the strings file the first time. */
        synchronized int id(String s) {
            if (s == null) {
                return -1;
            }
            Integer known = ids.get(s);
            if (known != null) {
                return known;
            }
            int id = ids.size();
            ids.put(s, id);
            byte[] b = s.getBytes(StandardCharsets.UTF_8);
            if (sbuf.remaining() < b.length + 4) {
                ByteBuffer bigger = ByteBuffer.allocate(Math.max(sbuf.capacity() * 2, sbuf.position() + b.length + 4))
                        .order(ByteOrder.LITTLE_ENDIAN);
                sbuf.flip();
                bigger.put(sbuf);
                sbuf = bigger;
            }
            sbuf.putInt(b.length).put(b);
            return id;
        }

        synchronized void send(byte kind, long seq, int key, int crc, long ts, MessageId id, int error) {
            put(kind, HAS_SEQ | HAS_CRC, key, ts, seq, id, -1, error, crc, -1, 0, 0);
        }

        /** receive (aux: redelivery count), ack, ack fail (aux: error string id) or nack of a delivered message. */
        synchronized void delivery(byte kind, long ts, Delivery d, int aux) {
            int flags = (d.seq >= 0 ? HAS_SEQ | HAS_PUBLISH_TS : 0) | (kind == RECEIVE ? HAS_CRC | HAS_REDELIVERY : 0);
            put(kind, flags, d.key, ts, d.seq, d.id, d.producer, aux, d.crc, d.topic, d.publishTs, 0);
        }

        synchronized void read(long ts, Delivery d, int topic, long index) {
            int flags = (d.seq >= 0 ? HAS_SEQ : 0) | HAS_CRC | HAS_READ_INDEX;
            put(READ, flags, d.key, ts, d.seq, d.id, d.producer, -1, d.crc, topic, 0, index);
        }

        synchronized void subscribe(long ts, int topic) {
            put(SUBSCRIBE, 0, -1, ts, 0, null, -1, -1, 0, topic, 0, 0);
        }

        /** A scan row: the end position rides in the key slot, the error in the aux slot. */
        synchronized void scan(long ts, int topic, long count, MessageId last, int end, int error) {
            put(SCAN, HAS_READ_INDEX, end, ts, 0, last, -1, error, 0, topic, 0, count);
        }

        private void put(byte kind, int flags, int key, long ts, long seq, MessageId id, int producer, int aux, int crc,
                         int topic, long publishTs, long readIndex) {
            if (closed) {
                return; // a late callback after close: the run is over
            }
            if (!buf.hasRemaining()) {
                try {
                    flush();
                } catch (IOException e) {
                    throw new IllegalStateException("journal write failed", e);
                }
            }
            long ledger = -1, entry = -1;
            int partition = -1, batch = -1;
            if (id != null) {
                flags |= HAS_ID;
                long[] f = idFields(id);
                ledger = f[0];
                entry = f[1];
                partition = (int) f[2];
                batch = (int) f[3];
            }
            buf.put(kind).put((byte) flags).putShort((short) 0).putInt(key).putLong(ts).putLong(seq)
                    .putLong(ledger).putLong(entry).putInt(partition).putInt(batch)
                    .putInt(producer).putInt(aux).putInt(crc).putInt(topic).putLong(publishTs).putLong(readIndex);
        }

        synchronized void flush() throws IOException {
            if (sbuf.position() > 0) {
                sbuf.flip();
                while (sbuf.hasRemaining()) {
                    strings.write(sbuf);
                }
                sbuf.clear();
            }
            if (buf.position() > 0) {
                buf.flip();
                while (buf.hasRemaining()) {
                    events.write(buf);
                }
                buf.clear();
            }
        }

        @Override
        public synchronized void close() throws IOException {
            if (closed) {
                return;
            }
            flush();
            closed = true;
            events.close();
            strings.close();
        }
    }
}
