// What every SDK scenario script shares: reading its inputs from the
// environment and running named checks that end the process at the first
// failure.

let passed = 0;

/** The environment variable `name`; its absence ends the run. */
export function input(name) {
  const value = process.env[name];
  if (value === undefined || value === '') {
    console.error(`FAIL - environment variable ${name} is not set`);
    process.exit(1);
  }
  return value;
}

/** Runs one named check; the first failure ends the process. */
export async function check(name, body) {
  try {
    await body();
  } catch (error) {
    console.error(`FAIL - ${name}`);
    console.error(error instanceof Error ? (error.stack ?? error.message) : error);
    process.exit(1);
  }
  passed += 1;
  console.log(`ok - ${name}`);
}

/** Prints the closing line the Rust test looks for. */
export function done() {
  console.log(`all ${passed} checks passed`);
}
