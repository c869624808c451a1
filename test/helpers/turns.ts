/**
 * Counts the event loop's turns from now until `stop()`: a setImmediate that schedules itself again.
 * Work that ran in one synchronous go lets none happen while it runs.
 */
export function countTurns(): { stop(): number } {
  let turns = 0;
  let counting = true;
  const turn = () => {
    turns++;
    if (counting) setImmediate(turn);
  };
  setImmediate(turn);
  return {
    stop() {
      counting = false;
      return turns;
    },
  };
}
