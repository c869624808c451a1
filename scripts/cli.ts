/**
 * Runs a command-line entry point: what it returns is the exit code; an error it throws is printed
 * as one line (no stack: these are messages for an operator) and exits 1.
 */
export function runCli(main: (argv: string[]) => Promise<number>): void {
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (err: unknown) => {
      process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
      process.exit(1);
    },
  );
}
