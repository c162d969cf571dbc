// Load a pass directory (pass.json, images, <lang>.lproj/pass.strings) with passkit-generator,
// an independent implementation, build and sign the pass, and report what it complained about.
//
//   node load_pass.mjs <model.pass> --signer-cert signer.pem --signer-key signer-key.pem --wwdr wwdr.pem
//
// Prints one JSON object and exits 0:
//   {"warnings": [...], "errors": [...], "languages": {lang: {key: value}}, "files": [...],
//    "props": {...}, "bytes": n}
// warnings: everything passed to console.warn / console.error; errors: every thrown error.
//
// passkit-generator reads pass.strings as UTF-8 only, while Apple's tools (and Tessera) write
// UTF-16 with a byte order mark, which Wallet prefers. So that the strings are still parsed by
// passkit-generator (and not silently skipped), UTF-16 files are transcoded to UTF-8 in a copy
// of the model first; their names are listed in "transcoded".

import { Buffer } from "node:buffer";
import { cp, mkdtemp, readFile, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { PKPass } from "passkit-generator";

const warnings = [];
const errors = [];
const describe = (value) =>
  value instanceof Error ? `${value.name}: ${value.message}` : typeof value === "string" ? value : JSON.stringify(value);
for (const level of ["warn", "error"]) {
  console[level] = (...args) => warnings.push(args.map(describe).join(" "));
}

function decodeStrings(buffer) {
  if (buffer[0] === 0xff && buffer[1] === 0xfe) return buffer.subarray(2).toString("utf16le");
  if (buffer[0] === 0xfe && buffer[1] === 0xff) {
    const swapped = Buffer.from(buffer.subarray(2));
    return swapped.swap16().toString("utf16le");
  }
  return null;
}

async function utf8Copy(model) {
  const copy = path.join(await mkdtemp(path.join(tmpdir(), "tessera-model-")), "model.pass");
  await cp(model, copy, { recursive: true });
  const transcoded = [];
  for (const entry of await readdir(copy, { withFileTypes: true })) {
    if (!entry.isDirectory() || !entry.name.endsWith(".lproj")) continue;
    const file = path.join(copy, entry.name, "pass.strings");
    const text = decodeStrings(await readFile(file).catch(() => Buffer.alloc(0)));
    if (text !== null) {
      await writeFile(file, text, "utf8");
      transcoded.push(`${entry.name}/pass.strings`);
    }
  }
  return { copy, transcoded };
}

async function main() {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      "signer-cert": { type: "string" },
      "signer-key": { type: "string" },
      wwdr: { type: "string" },
    },
  });
  const report = { warnings, errors, transcoded: [], languages: {}, files: [], props: null, bytes: 0 };
  let copy = null;
  try {
    if (positionals.length !== 1 || path.extname(positionals[0]) !== ".pass") {
      throw new Error("usage: load_pass.mjs <dir ending in .pass> --signer-cert --signer-key --wwdr");
    }
    const certificates = {
      signerCert: await readFile(values["signer-cert"]),
      signerKey: await readFile(values["signer-key"]),
      wwdr: await readFile(values.wwdr),
    };
    const prepared = await utf8Copy(positionals[0]);
    copy = prepared.copy;
    report.transcoded = prepared.transcoded;
    const pass = await PKPass.from({ model: copy, certificates });
    report.props = pass.props;
    const buffer = pass.getAsBuffer();
    report.bytes = buffer.length;
    report.files = Object.keys(pass.getAsRaw()).sort();
    for (const language of pass.languages) {
      const raw = pass.getAsRaw()[`${language}.lproj/pass.strings`];
      report.languages[language] = raw ? Object.fromEntries(parseStrings(raw.toString("utf8"))) : {};
    }
  } catch (error) {
    errors.push(describe(error));
  } finally {
    if (copy !== null) await rm(path.dirname(copy), { recursive: true, force: true });
  }
  process.stdout.write(`${JSON.stringify(report)}\n`);
}

function parseStrings(text) {
  return [...text.matchAll(/^"((?:[^"\\]|\\.)*)" = "((?:[^"\\]|\\.)*)";$/gm)].map((match) => [match[1], match[2]]);
}

await main();
