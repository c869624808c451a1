import type { Knex } from 'knex';
import { selectBuilt } from './knex.js';

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

/** Reads `page` and `limit` (or Novu's `pageSize`) from a validated query, with their defaults. */
export function pageRequest(query: { page?: number; limit?: number; pageSize?: number } | undefined): PageRequest {
  return { page: query?.page ?? 0, limit: query?.limit ?? query?.pageSize ?? DEFAULT_PAGE_SIZE };
}

/**
 * Runs a filtered query as one page plus an exact total (both read as selectBuilt reads).
 * `orderBy` must end in a unique column so that pages never overlap or skip rows. `toWire` maps a
 * whole page, so it can load related rows in one query.
 */
export async function paginate<Row, T>(
  query: Knex.QueryBuilder,
  { page, limit }: PageRequest,
  orderBy: Array<{ column: string; order: 'asc' | 'desc' }>,
  toWire: (rows: Row[]) => T[] | Promise<T[]>,
): Promise<Page<T>> {
  const [countRow] = await selectBuilt<{ n: number | string }>(query.clone().clearSelect().clearOrder().count({ n: '*' }));
  const totalCount = Number(countRow.n);
  const offset = page * limit;
  const rows = offset >= totalCount ? [] : await selectBuilt<Row>(query.clone().orderBy(orderBy).limit(limit).offset(offset));
  return {
    data: await toWire(rows),
    totalCount,
    page,
    pageSize: limit,
    hasMore: offset + rows.length < totalCount,
  };
}
