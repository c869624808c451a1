import type { Knex } from 'knex';
import { selectBuiltInBackground, selectBuiltPage } from './knex.js';
import { pacer } from '../turns.js';
import { slicesByText } from './chunks.js';
import { reserveForAnswer } from '../answer-memory.js';

export interface PageRequest {
  page: number;
  limit: number;
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

/** Reads `page` and `limit` (or Novu's `pageSize`) from a validated query, with their defaults. */
export function pageRequest(query: { page?: number; limit?: number; pageSize?: number } | undefined): PageRequest {
  return { page: query?.page ?? 0, limit: query?.limit ?? query?.pageSize ?? DEFAULT_PAGE_SIZE };
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
 * the page shows. `large` names the columns that can hold large stored values: the page reserves
 * what they hold before it is read (pageBytes).
 */
export async function paginate<Row, T>(
  query: Knex.QueryBuilder,
  { page, limit }: PageRequest,
  orderBy: Array<{ column: string; order: 'asc' | 'desc' }>,
  toWire: (rows: Row[]) => T[] | Promise<T[]>,
  counted: Knex.QueryBuilder = query,
  large: string[] = [],
): Promise<Page<T>> {
  const totalCount = await countOf(counted);
  const offset = page * limit;
  if (offset >= totalCount) return pageOf([], totalCount, { page, limit });
  const paged = query.clone().orderBy(orderBy).limit(limit).offset(offset);
  if (large.length > 0) await reserveForAnswer(await pageBytes(paged, large, offset));
  const rows = await pageRows<Row>(paged, offset);
  return pageOf(await toWireInSlices(rows, toWire), totalCount, { page, limit });
}

/**
 * The bytes the `columns` of a page's rows hold together, measured by the database without
 * reading them (`octet_length`), for the answer's memory (answer-memory.ts) before the page is read.
 */
export async function pageBytes(paged: Knex.QueryBuilder, columns: string[], offset: number): Promise<number> {
  const { client } = paged;
  const sized = paged.clone().clearSelect().select(client.raw(`${columns.map((column) => `coalesce(octet_length(${column}), 0)`).join(' + ')} AS b`));
  const [row] = await pageRows<{ n: number | string | null }>(client.queryBuilder().sum({ n: 'b' }).from(sized.as('p')), offset);
  return Number(row?.n ?? 0);
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
