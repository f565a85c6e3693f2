"""zkadmin.py: what test/security.sh asks of ZooKeeper besides zklock's tools,
done with python kazoo: an administrator's set-up (as the servers'
superuser, $ZKLOCK_TEST_SUPER), another client's attempts, and lock nodes
whose data is hostile.

    zkadmin.py root PATH USER...      as the superuser: create PATH (and its
                                      parents) with ACL "USER:USER-pw may do
                                      anything" for each USER, anyone may read
    zkadmin.py acl PATH               print PATH's ACL as the superuser sees
                                      it, one scheme:id:perms per line (perms
                                      as crwda)
    zkadmin.py children PATH          print how many children PATH has (0 if
                                      it does not exist)
    zkadmin.py delete USER PATH       as USER:USER-pw, try to delete every
                                      child of PATH; print "deleted" or the
                                      error's name
    zkadmin.py digest USER            print the digest id of USER:USER-pw
    zkadmin.py hostile PATH READY     create lock nodes under PATH whose data
                                      is hostile (see HOSTILE), write their
                                      count to READY, keep them (ephemeral)
                                      until SIGTERM or 120 s
    zkadmin.py holder PATH DATA READY one lock node with DATA (\\xNN escapes
                                      allowed), kept as with hostile

The servers are $ZKLOCK_TEST_HOSTS.
"""
import os
import signal
import sys
import uuid

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException
from kazoo.security import ACL, Id, Permissions, make_digest_acl, make_digest_acl_credential

# Lock node data that tries to forge zklock-ls's output: rows, escape
# sequences, bytes that are not UTF-8, a NUL, a lot of text.
HOSTILE = [
    b"line one\nline two\n  9    holds  mutex      0000000099  1.0s    1            forged",
    b"\x1b[31mred\x1b[0m \x1b]0;title\x07 \x1b[2J\x1b[H",
    b"\r  1    holds  mutex      0000000001  0.1s    1            carriage",
    b"before-nul\x00after-nul",
    b"\xff\xfe invalid \xc3\x28 utf-8 \xed\xa0\x80",
    b"\xc2\x9b31m c1-csi \xe2\x80\xae reversed",
    b"tab\there\x7fdel\\x41 backslash",
    b"x" * (1000 * 1024),  # about 1 MiB: what a request carries, less room for the rest
]


def client(auth=None):
    zk = KazooClient(hosts=os.environ["ZKLOCK_TEST_HOSTS"], auth_data=auth or [])
    zk.start(timeout=20)
    return zk


def creds(user):
    return ("digest", "%s:%s-pw" % (user, user))


def perms_text(perms):
    bits = [(Permissions.CREATE, "c"), (Permissions.READ, "r"), (Permissions.WRITE, "w"),
            (Permissions.DELETE, "d"), (Permissions.ADMIN, "a")]
    return "".join(letter for bit, letter in bits if perms & bit)


def root(path, *users):
    zk = client([("digest", os.environ["ZKLOCK_TEST_SUPER"])])
    acl = [make_digest_acl(u, u + "-pw", all=True) for u in users]
    acl.append(ACL(Permissions.READ, Id("world", "anyone")))
    zk.ensure_path(os.path.dirname(path) or "/")
    zk.create(path, b"", acl=acl)
    zk.stop()


def show_acl(path):
    zk = client([("digest", os.environ["ZKLOCK_TEST_SUPER"])])  # digest ids in full
    acl, _ = zk.get_acls(path)
    for entry in acl:
        print("%s:%s:%s" % (entry.id.scheme, entry.id.id, perms_text(entry.perms)))
    zk.stop()


def children(path):
    zk = client()
    print(len(zk.get_children(path)) if zk.exists(path) else 0)
    zk.stop()


def delete(user, path):
    zk = client([creds(user)])
    try:
        for child in zk.get_children(path):
            zk.delete(path + "/" + child)
        print("deleted")
    except KazooException as e:
        print(type(e).__name__)
    zk.stop()


def keep_until_term(zk, ready, count):
    """Keeps the session (and its ephemeral nodes) until SIGTERM, or 120 s
    if the test forgot us; then closes it, so that the nodes go at once."""
    signal.signal(signal.SIGTERM, lambda sig, frame: sys.exit(0))
    signal.signal(signal.SIGALRM, lambda sig, frame: sys.exit(0))
    signal.alarm(120)
    with open(ready + ".tmp", "w") as f:
        f.write("%d\n" % count)
    os.rename(ready + ".tmp", ready)
    try:
        signal.pause()
    finally:
        zk.stop()
        zk.close()


def lock_node(zk, path, data):
    zk.create("%s/_c_%s-lock-" % (path, uuid.uuid4()), data, ephemeral=True, sequence=True,
              makepath=True)


def hostile(path, ready):
    zk = client()
    for data in HOSTILE:
        lock_node(zk, path, data)
    keep_until_term(zk, ready, len(HOSTILE))


def holder(path, data, ready):
    zk = client()
    lock_node(zk, path, data.encode().decode("unicode_escape").encode("latin-1"))
    keep_until_term(zk, ready, 1)


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "root":
        root(*args)
    elif cmd == "acl":
        show_acl(*args)
    elif cmd == "children":
        children(*args)
    elif cmd == "delete":
        delete(*args)
    elif cmd == "digest":
        print(make_digest_acl_credential(args[0], args[0] + "-pw"))
    elif cmd == "hostile":
        hostile(*args)
    elif cmd == "holder":
        holder(*args)
    else:
        sys.exit("zkadmin.py: unknown command " + cmd)


if __name__ == "__main__":
    main()
