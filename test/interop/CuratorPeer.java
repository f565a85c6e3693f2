// CuratorPeer: the JVM side of zklock's interoperability tests.
//
//   java CuratorPeer HOSTS PATH MODE ITERATIONS LOG ID HOLD_MS [GOFILE]
//
// MODE is mutex (InterProcessMutex), read or write (InterProcessReadWriteLock),
// semN (InterProcessSemaphoreV2 with N leases), latch (LeaderLatch: acquire =
// lead, release = close) or selector (LeaderSelector: lead in takeLeadership
// until released); ID is the participant's id. MODE who prints the leader's
// id as LeaderLatch.getLeader() sees it (ITERATIONS and the rest ignored).
// MODE revoke: Revoker.attemptRevoke on PATH (a holder's node), then exit.
// MODE revocable: an InterProcessMutex made revocable (makeRevocable before
// acquiring): once held it logs "enter", and when its listener is called
// (someone wrote __REVOKE__ into its node) it logs "leave ID revocable
// revoked" and releases (on its own thread: the listener only signals);
// exit 1 if nobody asks within 60 s.
// For each iteration: acquire (60 s at most), append "<ns> enter ID MODE" to
// LOG, hold for HOLD_MS (or, with GOFILE, until that file exists), append
// "<ns> leave ID MODE", release. Timestamps are the wall clock in ns, as
// `date +%s%N` and Python's time.time_ns() write them. Exit 0 on success.
import java.io.File;
import java.io.FileOutputStream;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.concurrent.TimeUnit;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import java.util.concurrent.CountDownLatch;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.LeaderSelector;
import org.apache.curator.framework.recipes.leader.LeaderSelectorListenerAdapter;
import org.apache.curator.framework.recipes.locks.InterProcessLock;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.framework.recipes.locks.Revoker;
import org.apache.curator.retry.ExponentialBackoffRetry;

public class CuratorPeer {
    static long wallNs() {
        Instant t = Instant.now();
        return t.getEpochSecond() * 1_000_000_000L + t.getNano();
    }

    static void log(String file, String line) throws Exception {
        // one write per line on an append-mode file: lines never interleave
        try (FileOutputStream out = new FileOutputStream(file, true)) {
            out.write((line + "\n").getBytes(StandardCharsets.UTF_8));
        }
    }

    // A lease of an InterProcessSemaphoreV2, as an InterProcessLock.
    static InterProcessLock semaphore(CuratorFramework c, String path, int leases) {
        InterProcessSemaphoreV2 sem = new InterProcessSemaphoreV2(c, path, leases);
        return new InterProcessLock() {
            Lease lease;
            public void acquire() throws Exception { lease = sem.acquire(); }
            public boolean acquire(long time, TimeUnit unit) throws Exception {
                lease = sem.acquire(time, unit);
                return lease != null;
            }
            public void release() throws Exception { lease.close(); lease = null; }
            public boolean isAcquiredInThisProcess() { return lease != null; }
        };
    }

    // Leading a LeaderLatch, as an InterProcessLock (a latch is started once).
    static InterProcessLock latch(CuratorFramework c, String path, String id) {
        return new InterProcessLock() {
            LeaderLatch latch;
            public void acquire() throws Exception { acquire(1, TimeUnit.DAYS); }
            public boolean acquire(long time, TimeUnit unit) throws Exception {
                latch = new LeaderLatch(c, path, id);
                latch.start();
                return latch.await(time, unit);
            }
            public void release() throws Exception { latch.close(); latch = null; }
            public boolean isAcquiredInThisProcess() { return latch != null && latch.hasLeadership(); }
        };
    }

    // Leading through a LeaderSelector (an InterProcessMutex underneath):
    // takeLeadership returns, and so leadership ends, at release.
    static InterProcessLock selector(CuratorFramework c, String path, String id) {
        return new InterProcessLock() {
            LeaderSelector sel;
            CountDownLatch leading, done;
            public void acquire() throws Exception { acquire(1, TimeUnit.DAYS); }
            public boolean acquire(long time, TimeUnit unit) throws Exception {
                leading = new CountDownLatch(1);
                done = new CountDownLatch(1);
                sel = new LeaderSelector(c, path, new LeaderSelectorListenerAdapter() {
                    public void takeLeadership(CuratorFramework cf) throws Exception {
                        leading.countDown();
                        done.await();
                    }
                });
                sel.setId(id);
                sel.start();
                return leading.await(time, unit);
            }
            public void release() throws Exception { done.countDown(); sel.close(); sel = null; }
            public boolean isAcquiredInThisProcess() { return sel != null && sel.hasLeadership(); }
        };
    }

    public static void main(String[] a) throws Exception {
        if (a.length < 7) {
            System.err.println("usage: CuratorPeer HOSTS PATH MODE ITERATIONS LOG ID HOLD_MS [GOFILE]");
            System.exit(2);
        }
        String hosts = a[0], path = a[1], mode = a[2], logFile = a[4], id = a[5];
        int iterations = Integer.parseInt(a[3]);
        long holdMs = Long.parseLong(a[6]);
        File go = a.length > 7 ? new File(a[7]) : null;
        CuratorFramework c = CuratorFrameworkFactory.builder().connectString(hosts)
                .sessionTimeoutMs(10000).connectionTimeoutMs(5000)
                .retryPolicy(new ExponentialBackoffRetry(100, 3)).build();
        c.start();
        if (!c.blockUntilConnected(20, TimeUnit.SECONDS)) {
            System.err.println("CuratorPeer: cannot connect to " + hosts);
            System.exit(1);
        }
        InterProcessLock lock;
        if (mode.equals("revoke")) {
            Revoker.attemptRevoke(c, path);
            c.close();
            System.exit(0);
        }
        if (mode.equals("revocable")) {
            InterProcessMutex m = new InterProcessMutex(c, path);
            CountDownLatch asked = new CountDownLatch(1);
            m.makeRevocable(forLock -> asked.countDown());
            if (!m.acquire(60, TimeUnit.SECONDS)) {
                System.err.println("CuratorPeer " + id + ": timed out");
                System.exit(1);
            }
            log(logFile, wallNs() + " enter " + id + " " + mode);
            boolean revoked = asked.await(60, TimeUnit.SECONDS);
            log(logFile, wallNs() + " leave " + id + " " + mode + (revoked ? " revoked" : ""));
            m.release();
            c.close();
            System.exit(revoked ? 0 : 1);
        }
        if (mode.equals("who")) {
            System.out.println(new LeaderLatch(c, path, "observer").getLeader().getId());
            c.close();
            System.exit(0);
        }
        if (mode.equals("latch")) {
            lock = latch(c, path, id);
        } else if (mode.equals("selector")) {
            lock = selector(c, path, id);
        } else if (mode.startsWith("sem")) {
            lock = semaphore(c, path, Integer.parseInt(mode.substring(3)));
        } else if (mode.equals("mutex")) {
            lock = new InterProcessMutex(c, path);
        } else {
            InterProcessReadWriteLock rw = new InterProcessReadWriteLock(c, path);
            lock = mode.equals("read") ? rw.readLock() : rw.writeLock();
        }
        int status = 0;
        for (int i = 0; i < iterations; i++) {
            if (!lock.acquire(60, TimeUnit.SECONDS)) {
                System.err.println("CuratorPeer " + id + ": timed out");
                status = 1;
                break;
            }
            log(logFile, wallNs() + " enter " + id + " " + mode);
            if (go != null) {
                long deadline = System.currentTimeMillis() + 60000;
                while (!go.exists() && System.currentTimeMillis() < deadline)
                    Thread.sleep(20); // polls for the test's signal
            } else if (holdMs > 0) {
                Thread.sleep(holdMs);
            }
            log(logFile, wallNs() + " leave " + id + " " + mode);
            lock.release();
        }
        c.close();
        System.exit(status);
    }
}
