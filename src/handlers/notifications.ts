import { notYet } from './not-yet.js';

export const listNotifications = notYet('listNotifications');
export const getNotificationStats = notYet('getNotificationStats');
export const getNotification = notYet('getNotification');
