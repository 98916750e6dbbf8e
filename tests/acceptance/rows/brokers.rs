//! Rows 23–27 and 51–54: broker destinations and sources (RabbitMQ, Kafka, NATS).
