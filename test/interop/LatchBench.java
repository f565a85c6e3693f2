// LatchBench: Curator's LeaderLatch, measured as zklock-bench measures
// zklock's election (test/election-figures.sh runs both).
//
//   java LatchBench HOSTS handover PATH N            two participants take
//        turns leading N times: resign (close) to the next leader's await,
//        one JSON line (p50_us, p99_us, mean_us)
//   java LatchBench HOSTS lead PATH ID SESSION_MS     leads, prints "leading",
//        and leads until killed
//   java LatchBench HOSTS standby PATH ID SESSION_MS  prints "waiting" once
//        queued, then the wall clock (ns) when it leads, and exits
import java.time.Instant;
import java.util.Arrays;
import java.util.concurrent.TimeUnit;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.retry.ExponentialBackoffRetry;

public class LatchBench {
    static CuratorFramework client(String hosts, int sessionMs) throws Exception {
        CuratorFramework c = CuratorFrameworkFactory.builder().connectString(hosts)
                .sessionTimeoutMs(sessionMs).connectionTimeoutMs(5000)
                .retryPolicy(new ExponentialBackoffRetry(100, 3)).build();
        c.start();
        c.blockUntilConnected();
        return c;
    }

    static long wallNs() {
        Instant t = Instant.now();
        return t.getEpochSecond() * 1_000_000_000L + t.getNano();
    }

    static final Object mu = new Object();
    static long resignedAt; // System.nanoTime() of the last close, 0 before
    static double[] handover;
    static int handovers;

    static void takeTerms(CuratorFramework c, String path, String id, int n) {
        try {
            for (;;) {
                LeaderLatch latch = new LeaderLatch(c, path, id);
                latch.start();
                latch.await();
                boolean last;
                synchronized (mu) {
                    if (resignedAt != 0 && handovers < n)
                        handover[handovers++] = (System.nanoTime() - resignedAt) / 1e3;
                    last = handovers >= n;
                    resignedAt = System.nanoTime();
                }
                latch.close();
                if (last)
                    return;
            }
        } catch (Exception e) {
            e.printStackTrace();
            System.exit(1);
        }
    }

    static double pct(double[] sorted, int n, double p) {
        return sorted[Math.min(n - 1, (int) (p * n))];
    }

    public static void main(String[] a) throws Exception {
        String hosts = a[0], mode = a[1], path = a[2];
        if (mode.equals("handover")) {
            int n = Integer.parseInt(a[3]);
            handover = new double[n];
            CuratorFramework c1 = client(hosts, 10000), c2 = client(hosts, 10000);
            // JIT warm-up on another path
            for (int i = 0; i < 50; i++) {
                LeaderLatch w = new LeaderLatch(c1, path + "-warmup", "w");
                w.start();
                w.await();
                w.close();
            }
            Thread t1 = new Thread(() -> takeTerms(c1, path, "one", n));
            Thread t2 = new Thread(() -> takeTerms(c2, path, "two", n));
            t1.start();
            t2.start();
            t1.join();
            t2.join();
            double[] s = Arrays.copyOf(handover, handovers);
            Arrays.sort(s);
            double mean = Arrays.stream(s).average().orElse(0);
            System.out.printf("{\"peer\":\"curator\",\"workload\":\"election\",\"handovers\":%d,"
                    + "\"p50_us\":%.1f,\"p99_us\":%.1f,\"mean_us\":%.1f}%n",
                    handovers, pct(s, handovers, .5), pct(s, handovers, .99), mean);
            c1.close();
            c2.close();
            System.exit(0);
        }
        String id = a[3];
        int sessionMs = Integer.parseInt(a[4]);
        CuratorFramework c = client(hosts, sessionMs);
        LeaderLatch latch = new LeaderLatch(c, path, id);
        latch.start();
        if (mode.equals("lead")) {
            latch.await();
            System.out.println("leading");
            System.out.flush();
            Thread.sleep(Long.MAX_VALUE);
        }
        System.out.println("waiting");
        System.out.flush();
        latch.await();
        System.out.println(wallNs());
        System.out.flush();
        System.exit(0);
    }
}
