#!/usr/bin/env python3
"""abi/grown.py BASELINE NOW: prints NOW (an abidw dump) with the growth that
zklock(3), ABI AND VERSIONS, allows taken out, for abidiff to compare with
BASELINE: a struct below that may gain members at its end and did so (the
baseline's members, each at its offset with its name and type, come first and
unchanged) is cut back to the baseline's members and size. Any other change
of it is left for abidiff to report, and so is every change of what it
refers to (the types are compared on their own).

(Not a libabigail suppression: in libabigail 2.2 "has_data_member_inserted_at
= end" hides every change below the struct, those of the types it points to
included.)"""
import sys
import xml.etree.ElementTree as ET

# Sized by the caller (zklock_session_stats, zklock_lock_stats,
# zklock_previous_info), or made by the library and read through its pointer
# (zklock_queue_t).
GROW_AT_END = ("zklock_stats", "zklock_lock_stats", "zklock_previous_info", "zklock_queue")


def definitions(root, name):
    return [c for c in root.iter("class-decl")
            if c.get("name") == name and c.get("is-declaration-only") != "yes"]


def layout(member):
    var = member.find("var-decl")
    return (member.get("layout-offset-in-bits"), var.get("name"), var.get("type-id"))


def cut_back(old, new):
    """new's members past old's, removed, if old's come first unchanged."""
    old_members = old.findall("data-member")
    new_members = new.findall("data-member")
    if len(new_members) <= len(old_members):
        return False
    if [layout(m) for m in new_members[:len(old_members)]] != [layout(m) for m in old_members]:
        return False
    for extra in new_members[len(old_members):]:
        new.remove(extra)
    new.set("size-in-bits", old.get("size-in-bits"))
    return True


def main(baseline, now):
    old_root = ET.parse(baseline).getroot()
    tree = ET.parse(now)
    for name in GROW_AT_END:
        old = definitions(old_root, name)
        for new in definitions(tree.getroot(), name):
            if old and cut_back(old[0], new):
                print(f"# {name}: grew at its end (allowed)", file=sys.stderr)
    tree.write(sys.stdout, encoding="unicode")


if __name__ == "__main__":
    main(*sys.argv[1:])
