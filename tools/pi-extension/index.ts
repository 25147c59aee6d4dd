/**
 * Entry point when this folder is copied into Pi's extensions directory
 * (`cp -r tools/pi-extension ~/.pi/agent/extensions/rewind-ledger`: Pi loads `*/index.ts`).
 * `pi install` and `pi -e` load rewind-ledger.ts directly; both are the same extension.
 */
export { default } from "./rewind-ledger.ts";
