// A minimal npm registry for the install test: serves the packages of the tarballs in one
// directory (dist/npm) — a packument per package name with the version's manifest, its
// tarball URL and integrity — so `npm install @alternayte/queuebox-inbox` runs npm's real
// resolution, including picking the platform package among the optionalDependencies by
// os/cpu/libc. Any other name answers 404 (the packages have no other dependencies).
//   node registry.mjs <dir> <port-file>   prints nothing; writes the port it listens on
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { join } from "node:path";

const [dir, portFile] = process.argv.slice(2);
const packages = new Map(); // name -> { manifest, file, integrity, shasum }
for (const file of readdirSync(dir).filter((f) => f.endsWith(".tgz"))) {
  const bytes = readFileSync(join(dir, file));
  const manifest = JSON.parse(execFileSync("tar", ["-xzOf", join(dir, file), "package/package.json"], { encoding: "utf8" }));
  packages.set(manifest.name, {
    manifest,
    file,
    integrity: "sha512-" + createHash("sha512").update(bytes).digest("base64"),
    shasum: createHash("sha1").update(bytes).digest("hex"),
  });
}

const server = createServer((req, res) => {
  const base = `http://127.0.0.1:${server.address().port}`;
  const path = decodeURIComponent(req.url.split("?")[0]);
  if (path.startsWith("/-/files/")) {
    const entry = [...packages.values()].find((p) => p.file === path.slice("/-/files/".length));
    if (entry) {
      res.writeHead(200, { "content-type": "application/octet-stream" });
      return res.end(readFileSync(join(dir, entry.file)));
    }
  }
  const entry = packages.get(path.slice(1));
  if (!entry) {
    res.writeHead(404, { "content-type": "application/json" });
    return res.end(JSON.stringify({ error: "not found" }));
  }
  const { manifest } = entry;
  const version = {
    ...manifest,
    _id: `${manifest.name}@${manifest.version}`,
    dist: { tarball: `${base}/-/files/${entry.file}`, integrity: entry.integrity, shasum: entry.shasum },
  };
  res.writeHead(200, { "content-type": "application/json" });
  res.end(JSON.stringify({ name: manifest.name, "dist-tags": { latest: manifest.version }, versions: { [manifest.version]: version } }));
});
server.listen(0, "127.0.0.1", () => writeFileSync(portFile, String(server.address().port)));
