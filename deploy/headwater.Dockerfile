# The headwater image (docker-compose.yml): the server, and Spark standalone from the
# same pyspark wheel for the spark-master and spark-worker services.
FROM python:3.11-slim-bookworm
RUN apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /opt/headwater
COPY . .
RUN pip install --no-cache-dir .
EXPOSE 6544 9188 7077 8080
CMD ["headwater", "start", "--host", "0.0.0.0"]
