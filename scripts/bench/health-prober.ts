// node health-prober.js <base URL> <every ms>: asks <base>/health every <every ms> until stopped,
// and prints a line for each answer: when it was asked (milliseconds since the epoch) and its
// latency. The large run (large.ts) probes from this process of its own, so that what the bench
// does meanwhile (reading an 80 MB answer) does not delay the probes it times.
const [base, everyMs] = [process.argv[2], Number(process.argv[3])];

for (;;) {
  const at = performance.timeOrigin + performance.now();
  try {
    await fetch(`${base}/health`);
  } catch {
    // A refused probe is counted by its time all the same.
  }
  const ms = performance.timeOrigin + performance.now() - at;
  process.stdout.write(`${JSON.stringify({ at, ms })}\n`);
  if (ms < everyMs) await new Promise((resolve) => setTimeout(resolve, everyMs - ms));
}
