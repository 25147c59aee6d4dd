// Entry point when this folder is copied into Pi's extensions directory
// (`cp -r tools/pi-extension ~/.pi/agent/extensions/rewind-ledger`): Pi loads the index.ts of
// each folder there. `pi install` and `pi -e` load rewind-ledger.ts directly; all three are the
// same extension (tests/e2e/test_pi_install.py starts the real Pi through each of them).
// Line comments on purpose: a path pattern with a star and a slash in a block comment ends the
// comment early, and the file no longer parses.
export { default } from "./rewind-ledger.ts";
