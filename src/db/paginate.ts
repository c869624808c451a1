import type { Knex } from 'knex';
import { selectBuiltInBackground, selectBuiltPage } from './knex.js';
import { pacer } from '../turns.js';
import { slicesByText } from './chunks.js';
import type { ReserveForAnswer } from '../answer-memory.js';

export interface PageRequest {
  page: number;
  limit: number;
  /** For a page answered to a request: reserves the memory of its large stored values before they are read (answer-memory.ts). */
  reserve?: ReserveForAnswer;
}

export interface Page<T> {
  data: T[];
  totalCount: number;
  page: number;
  pageSize: number;
  hasMore: boolean;
}

export const DEFAULT_PAGE_SIZE = 10;

/**
 * Past this many rows skipped, a page is read off the event loop (selectBuiltInBackground): OFFSET
 * walks every row it skips, and a deep page of a large table would hold every other request.
 */
export const DEEP_OFFSET = 5_000;

/** Reads `page` and `limit` (or Novu's `pageSize`) from a validated query, with their defaults; `reserve`, the answer's (PageRequest). */
export function pageRequest(query: { page?: number; limit?: number; pageSize?: number } | undefined, reserve?: ReserveForAnswer): PageRequest {
  return { page: query?.page ?? 0, limit: query?.limit ?? query?.pageSize ?? DEFAULT_PAGE_SIZE, reserve };
}

/** The exact number of rows a filtered query answers, counted off the event loop. */
export async function countOf(query: Knex.QueryBuilder): Promise<number> {
  const [row] = await selectBuiltInBackground<{ n: number | string }>(query.clone().clearSelect().clearOrder().count({ n: '*' }));
  return Number(row.n);
}

/** A page's rows: a deep one off the event loop, and any whose rows turn out large (selectBuiltPage). */
export async function pageRows<Row>(query: Knex.QueryBuilder, offset: number): Promise<Row[]> {
  return offset >= DEEP_OFFSET ? selectBuiltInBackground<Row>(query) : selectBuiltPage<Row>(query);
}

/**
 * Runs a filtered query as one page plus an exact total. `orderBy` must end in a unique column so
 * that pages never overlap or skip rows. `toWire` maps a slice of rows at a time, so it can load
 * their related rows in one query (a page of small rows is one slice: toWireInSlices). `counted`
 * is the same filter without the page's joins, when it has any: the total need not read what only
 * the page shows. `largeBytes` is SQL for the bytes of a row's large stored values (bytesOf): a
 * page asked with `reserve` reserves what its rows hold (measured with its total) before it is read.
 */
export async function paginate<Row, T>(
  query: Knex.QueryBuilder,
  { page, limit, reserve }: PageRequest,
  orderBy: Array<{ column: string; order: 'asc' | 'desc' }>,
  toWire: (rows: Row[]) => T[] | Promise<T[]>,
  counted: Knex.QueryBuilder = query,
  largeBytes?: string,
): Promise<Page<T>> {
  const offset = page * limit;
  const paged = query.clone().orderBy(orderBy).limit(limit).offset(offset);
  const sized = reserve && largeBytes ? sizesOf(paged, largeBytes) : undefined;
  const { totalCount, bytes } = await countAndSize(counted, sized);
  if (offset >= totalCount) return pageOf([], totalCount, { page, limit });
  if (reserve && sized) await reserve(bytes);
  const rows = await pageRows<Row>(paged, offset);
  return pageOf(await toWireInSlices(rows, toWire), totalCount, { page, limit });
}

/**
 * SQL for the bytes a row's text `columns` hold together, which the database measures without
 * reading them (`octet_length`, from the row's header), for a page's reservation (answer-memory.ts).
 */
export function bytesOf(columns: string[]): string {
  return columns.map((column) => `coalesce(octet_length(${column}), 0)`).join(' + ');
}

/** The page's rows with only `b`, their `largeBytes`. */
function sizesOf(paged: Knex.QueryBuilder, largeBytes: string): Knex.QueryBuilder {
  return paged.clone().clearSelect().select(paged.client.raw(`${largeBytes} AS b`));
}

/** countOf, and in the same statement (off the event loop too) the bytes a page's `sized` rows hold together. */
async function countAndSize(counted: Knex.QueryBuilder, sized: Knex.QueryBuilder | undefined): Promise<{ totalCount: number; bytes: number }> {
  if (!sized) return { totalCount: await countOf(counted), bytes: 0 };
  const { client } = counted;
  const both = client
    .queryBuilder()
    .select(counted.clone().clearSelect().clearOrder().count('*').as('n'))
    .select(client.queryBuilder().sum('b').from(sized.as('p')).as('b'));
  const [row] = await selectBuiltInBackground<{ n: number | string; b: number | string | null }>(both);
  return { totalCount: Number(row.n), bytes: Number(row.b ?? 0) };
}

/**
 * `toWire(rows)`, a slice of rows at a time (`slicesByText`: parsing a page of large rows in one go
 * would hold the event loop for seconds) with a turn of the event loop between slices when one
 * has run long; a page of small rows is one slice, mapped in one call.
 */
export async function toWireInSlices<Row, T>(rows: Row[], toWire: (rows: Row[]) => T[] | Promise<T[]>): Promise<T[]> {
  const slices = slicesByText(rows);
  if (slices.length <= 1) return toWire(rows);
  const pace = pacer();
  const wire: T[] = [];
  for (const slice of slices) {
    for (const item of await toWire(slice)) wire.push(item);
    await pace();
  }
  return wire;
}

/** The page's envelope around its rows. */
export function pageOf<T>(data: T[], totalCount: number, { page, limit }: PageRequest): Page<T> {
  return { data, totalCount, page, pageSize: limit, hasMore: page * limit + data.length < totalCount };
}
