// Loads the QueueBox native addon (built from bindings/node by `napi build --platform`).
// QUEUEBOX_NATIVE_PATH overrides the location; otherwise the platform-named file is looked
// up beside this loader and in the package's native/ folder.
"use strict";
const fs = require("node:fs");
const path = require("node:path");

function candidates() {
  const abi = process.platform === "linux" ? (process.report && process.report.getReport().header.glibcVersionRuntime ? "-gnu" : "-musl") : "";
  const name = `queuebox.${process.platform}-${process.arch}${abi}.node`;
  const dirs = [__dirname, path.resolve(__dirname, "..", "..", "native")];
  const out = [];
  if (process.env.QUEUEBOX_NATIVE_PATH) out.push(process.env.QUEUEBOX_NATIVE_PATH);
  for (const d of dirs) out.push(path.join(d, name), path.join(d, "queuebox.node"));
  return out;
}

const tried = candidates();
const found = tried.find((p) => fs.existsSync(p));
if (!found) {
  throw new Error(`QueueBox native addon not found; looked for:\n  ${tried.join("\n  ")}\nBuild it with \`npm run build:native\`.`);
}
module.exports = require(found);
