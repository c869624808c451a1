/**
 * Prepared statements kept by their SQL text: a text is kept from its second use on, and once the
 * texts kept pass a budget the least recently used go first.
 *
 * A prepared SQLite statement holds about 25–35 bytes of memory for each character of its text,
 * and better-sqlite3 frees it only when V8 collects the statement, which does not know that memory
 * is there. Texts vary with the number of rows a multi-row insert writes, and a long one holds
 * megabytes prepared: kept from their first use, inserts of every size would grow a process by
 * hundreds of them. A text used once is left to V8, which collects it young, memory
 * and all; one that lasted in the cache and then goes waits for a full collection, so the
 * budget bounds what the statements used again and again (a request's lookups, a fan-out batch's
 * inserts) can take. The texts used once are forgotten all at once when they pass the budget, so a
 * text used again only after a few dozen large ones is prepared each time, as a one-off.
 */
export class StatementCache<Statement> {
  /** By text, least recently used first: a Map iterates in the order its keys were set. */
  private readonly statements = new Map<string, Statement>();
  private keptChars = 0;
  /** Texts used once and not kept, forgotten all at once when they pass the budget. */
  private seen = new Set<string>();
  private seenChars = 0;

  constructor(readonly budgetChars: number) {}

  /** The statement kept for `sql`, or one `prepare` makes now. */
  get(sql: string, prepare: (sql: string) => Statement): Statement {
    const kept = this.statements.get(sql);
    if (kept !== undefined) {
      this.statements.delete(sql);
      this.statements.set(sql, kept);
      return kept;
    }
    const statement = prepare(sql);
    if (sql.length > this.budgetChars) return statement;
    if (!this.seen.delete(sql)) {
      this.remember(sql);
      return statement;
    }
    this.seenChars -= sql.length;
    this.statements.set(sql, statement);
    this.keptChars += sql.length;
    // The text just kept is the last of the map and fits the budget alone: the loop stops before it.
    for (const text of this.statements.keys()) {
      if (this.keptChars <= this.budgetChars) break;
      this.statements.delete(text);
      this.keptChars -= text.length;
      // It has been used twice: its next use keeps it again.
      this.remember(text);
    }
    return statement;
  }

  /** The characters of the texts kept now. */
  get chars(): number {
    return this.keptChars;
  }

  has(sql: string): boolean {
    return this.statements.has(sql);
  }

  private remember(sql: string): void {
    if (this.seenChars + sql.length > this.budgetChars) {
      this.seen = new Set();
      this.seenChars = 0;
    }
    this.seen.add(sql);
    this.seenChars += sql.length;
  }
}
