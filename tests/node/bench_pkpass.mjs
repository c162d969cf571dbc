// Build rate of passkit-generator: the same pass as bench/pkpass.py, built and signed in a loop.
//
//   node bench_pkpass.mjs <model.pass> --signer-cert signer.pem --signer-key signer-key.pem \
//       --wwdr wwdr.pem [--seconds 5] [--warmup 20]
//
// The model's files are read once; every build then creates a PKPass from those buffers (its
// pass.json is parsed and validated), gives it its serial number, and produces the signed,
// zipped .pkpass with getAsBuffer(), the way a server answers a download. Prints JSON stats.

import { readFile, readdir } from "node:fs/promises";
import path from "node:path";
import { parseArgs } from "node:util";
import { PKPass } from "passkit-generator";

async function readModel(directory) {
  const files = {};
  for (const entry of await readdir(directory, { withFileTypes: true, recursive: true })) {
    if (!entry.isFile()) continue;
    const full = path.join(entry.parentPath ?? entry.path, entry.name);
    const relative = path.relative(directory, full).split(path.sep).join("/");
    if (relative === "manifest.json" || relative === "signature") continue;
    files[relative] = await readFile(full);
  }
  return files;
}

function percentile(sorted, fraction) {
  if (!sorted.length) return 0;
  return sorted[Math.max(1, Math.ceil(fraction * sorted.length)) - 1];
}

const round = (value, digits) => Number(value.toFixed(digits));

async function main() {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      "signer-cert": { type: "string" },
      "signer-key": { type: "string" },
      wwdr: { type: "string" },
      seconds: { type: "string", default: "5" },
      warmup: { type: "string", default: "20" },
    },
  });
  const [model] = positionals;
  const certificates = {
    signerCert: await readFile(values["signer-cert"]),
    signerKey: await readFile(values["signer-key"]),
    wwdr: await readFile(values.wwdr),
  };
  const files = await readModel(model);
  const build = (serialNumber) => new PKPass({ ...files }, certificates, { serialNumber }).getAsBuffer();

  for (let i = 0; i < Number(values.warmup); i++) build(`warmup-${i}`);
  const durations = [];
  let size = 0;
  const start = process.hrtime.bigint();
  const deadline = start + BigInt(Math.round(Number(values.seconds) * 1e9));
  for (;;) {
    const before = process.hrtime.bigint();
    size = build(`bench-${durations.length}`).length;
    const after = process.hrtime.bigint();
    durations.push(Number(after - before) / 1e6);
    if (after >= deadline) break;
  }
  const elapsed = Number(process.hrtime.bigint() - start) / 1e9;
  const sorted = [...durations].sort((a, b) => a - b);
  const manifest = new URL("./node_modules/passkit-generator/package.json", import.meta.url);
  const { version } = JSON.parse(await readFile(manifest, "utf8"));
  const stats = {
    builds: durations.length,
    seconds: round(elapsed, 3),
    builds_per_second: round(durations.length / elapsed, 1),
    mean_ms: round(durations.reduce((a, b) => a + b, 0) / durations.length, 3),
    p50_ms: round(percentile(sorted, 0.5), 3),
    p99_ms: round(percentile(sorted, 0.99), 3),
    pass_bytes: size,
  };
  const runtime = { node_version: process.version, passkit_generator_version: version };
  process.stdout.write(`${JSON.stringify({ results: stats, runtime })}\n`);
}

await main();
