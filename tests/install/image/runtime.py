"""Starts the process of an OCI runtime bundle (`umoci unpack` output) the way a container
runtime does, minus namespaces and cgroups: chroot into the rootfs, drop supplementary
groups, set gid and uid from process.user, chdir to process.cwd, exec process.args with
exactly process.env. Extra arguments replace the image's Cmd (the last element of args,
as umoci built it from Entrypoint + Cmd), as `podman run <image> <args...>` does.
Usage: runtime.py <bundle> [args...]"""
import json
import os
import sys

bundle = sys.argv[1]
spec = json.load(open(os.path.join(bundle, "config.json")))
proc = spec["process"]
args = proc["args"]
if len(sys.argv) > 2:
    args = args[:1] + sys.argv[2:]  # the entrypoint, then the given arguments
env = dict(e.split("=", 1) for e in proc.get("env", []))
root = os.path.join(bundle, spec["root"]["path"])
os.chroot(root)
os.chdir(proc.get("cwd", "/"))
os.setgroups(proc["user"].get("additionalGids", []))
os.setgid(proc["user"]["gid"])
os.setuid(proc["user"]["uid"])
os.execve(args[0], args, env)
