// Load a .pkpass with @walletpass/pass-js, a second independent implementation, as a wallet
// would read it: pass.json (its date setters keep a W3C date as written and re-parse anything
// else, refusing what does not parse), the images and every <lang>.lproj/pass.strings (read as
// UTF-16, the encoding Tessera writes); then build and sign a pass from it.
//
//   node load_pass_js.mjs <file.pkpass> --signer-cert signer.pem --signer-key signer-key.pem
//
// Prints one JSON object and exits 0:
//   {"errors": [...], "warnings": [...], "languages": {lang: {key: value}},
//    "dates": {"expirationDate": {"value": ..., "w3c": bool}, ...},
//    "dateFields": {key: {"value": ..., "instant": ISO}}, "style": ..., "bytes": n}
// errors: every thrown error; warnings: everything passed to console.warn / console.error;
// dates[...].w3c: pass-js kept the string as a valid W3C date (it re-parses any other).

import { readFile } from "node:fs/promises";
import { parseArgs } from "node:util";
import passJs from "@walletpass/pass-js";

const { Template } = passJs;
const STRUCTURE = ["headerFields", "primaryFields", "secondaryFields", "auxiliaryFields", "backFields"];

const warnings = [];
const errors = [];
const describe = (value) =>
  value instanceof Error ? `${value.name}: ${value.message}` : typeof value === "string" ? value : JSON.stringify(value);
for (const level of ["warn", "error"]) {
  console[level] = (...args) => warnings.push(args.map(describe).join(" "));
}

function dates(template) {
  const found = {};
  for (const key of ["expirationDate", "relevantDate"]) {
    const raw = template.fields[key];
    if (raw === undefined) continue;
    found[key] = { value: raw instanceof Date ? raw.toISOString() : raw, w3c: typeof raw === "string" };
  }
  return found;
}

function dateFields(template) {
  const found = {};
  for (const name of STRUCTURE) {
    for (const [key, data] of template[name]) {
      if (data.value instanceof Date) found[key] = { instant: data.value.toISOString() };
    }
  }
  return found;
}

async function main() {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: { "signer-cert": { type: "string" }, "signer-key": { type: "string" } },
  });
  const report = { errors, warnings, languages: {}, dates: {}, dateFields: {}, style: null, bytes: 0 };
  try {
    if (positionals.length !== 1) throw new Error("usage: load_pass_js.mjs <file.pkpass> --signer-cert --signer-key");
    const template = await Template.fromBuffer(await readFile(positionals[0]));
    report.style = template.style ?? null;
    report.dates = dates(template);
    report.dateFields = dateFields(template);
    for (const [language, strings] of template.localization) {
      report.languages[language] = Object.fromEntries(strings);
    }
    template.setCertificate(await readFile(values["signer-cert"], "utf8"));
    template.setPrivateKey(await readFile(values["signer-key"], "utf8"));
    const built = await template.createPass().asBuffer();
    report.bytes = built.length;
  } catch (error) {
    errors.push(describe(error));
  }
  process.stdout.write(`${JSON.stringify(report)}\n`);
}

await main();
