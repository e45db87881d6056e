/**
 * The source side of a pipeline: the streaming replication connection and its standby status
 * replies ({@code ReplicationConnection}), the slot's creation, checks and takeover ({@code
 * SlotManager}, {@code SlotJudgement}, {@code SlotHolders}) and the tables the publications stream,
 * read from the catalog ({@code PublishedTable}).
 */
package io.weir.persistence.cdc.source;
