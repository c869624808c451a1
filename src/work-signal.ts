/**
 * Tells the job runners of this process that work was queued for now (a trigger committed), so they
 * look at once instead of at their next idle poll. Runners in other processes find the work at
 * theirs. One per process, passed in `Deps`.
 */
export class WorkSignal {
  private readonly listeners = new Set<() => void>();

  /** Calls `listener` at every notify until the returned function is called. */
  listen(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  notify(): void {
    for (const listener of this.listeners) listener();
  }
}
