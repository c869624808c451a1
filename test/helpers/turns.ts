/**
 * Counts the event loop's turns from now until `stop()`: a setImmediate that schedules itself again.
 * Work that ran in one synchronous go lets none happen while it runs.
 */
export function countTurns(): { stop(): number; sofar(): number } {
  let turns = 0;
  let counting = true;
  const turn = () => {
    turns++;
    if (counting) setImmediate(turn);
  };
  setImmediate(turn);
  return {
    /** The turns so far, while counting goes on. */
    sofar: () => turns,
    stop() {
      counting = false;
      return turns;
    },
  };
}
