import { notYet } from './not-yet.js';

export const listTopics = notYet('listTopics');
export const createTopic = notYet('createTopic');
export const getTopic = notYet('getTopic');
export const deleteTopic = notYet('deleteTopic');
export const listTopicSubscribers = notYet('listTopicSubscribers');
export const addTopicSubscribers = notYet('addTopicSubscribers');
export const removeTopicSubscribers = notYet('removeTopicSubscribers');
