// Loads the QueueBox native addon (built from bindings/node by `napi build --platform`).
// QUEUEBOX_NATIVE_PATH overrides the location; otherwise the platform-named file is looked
// up beside this loader and in the package's native/ folder (a build in this repository),
// then in the platform package an install brings in as an optional dependency
// (`@alternayte/queuebox-inbox-linux-x64-gnu`, ...: the napi-rs layout, see npm/).
"use strict";
const fs = require("node:fs");
const path = require("node:path");

function triple() {
  const abi = process.platform === "linux" ? (process.report && process.report.getReport().header.glibcVersionRuntime ? "-gnu" : "-musl") : "";
  return `${process.platform}-${process.arch}${abi}`;
}

function candidates() {
  const name = `queuebox.${triple()}.node`;
  const dirs = [__dirname, path.resolve(__dirname, "..", "..", "native")];
  const out = [];
  if (process.env.QUEUEBOX_NATIVE_PATH) out.push(process.env.QUEUEBOX_NATIVE_PATH);
  for (const d of dirs) out.push(path.join(d, name), path.join(d, "queuebox.node"));
  return out;
}

function platformPackage() {
  const name = `@alternayte/queuebox-inbox-${triple()}`;
  try {
    return { name, addon: require(name) };
  } catch (e) {
    if (e && e.code === "MODULE_NOT_FOUND" && String(e.message).includes(name)) return { name, addon: null };
    throw e; // the package is there but its addon does not load: say why
  }
}

const tried = candidates();
const found = tried.find((p) => fs.existsSync(p));
if (found) {
  module.exports = require(found);
} else {
  const pkg = platformPackage();
  if (!pkg.addon) {
    throw new Error(
      `QueueBox has no native addon for ${triple()}: the optional dependency ${pkg.name} is not installed ` +
        `(npm skips it on a platform it was not published for, or with --omit=optional). ` +
        `Looked also for:\n  ${tried.join("\n  ")}\nIn the QueueBox repository, build it with \`npm run build:native\`.`,
    );
  }
  module.exports = pkg.addon;
}
